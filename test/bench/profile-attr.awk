# idem_etl benchmark (profile-upsert): perf script output -> share of the samples inside
# etl_upsert_batch per step, by the first frame from the leaf that names one.
function cat_of(f) {
  if (f ~ /^XLogInsert|^XLogInsertRecord/) return "WAL insert";
  if (f ~ /^ExecInsertIndexTuples/) return "index insert (write)";
  if (f ~ /^ExecCheckIndexConstraints|^ExecOnConflictUpdate|^check_exclusion_or_unique_constraint/) return "ON CONFLICT check/update";
  if (f ~ /^heap_insert|^heap_update|^heap_lock_tuple|^heap_finish_speculative|^ExecInsert$|^ExecUpdate/) return "heap write";
  if (f ~ /^idem_etl_same_image/) return "change test (same_image)";
  if (f ~ /^ExecSort|^tuplesort/) return "sort";
  if (f ~ /^IndexNext|^index_getnext|^ExecIndexScan|^index_fetch/) return "probe (index scan)";
  if (f ~ /^keep_winner|^pick_winners|^stage_keys_distinct|^hashes_distinct|^sort_key_hashes|^dedup_batch|^check_conflicts|^filter_receive/) return "key check / dedup";
  if (f ~ /^hashes_add|^hash_row|^hash_key|^stage_scan|^hash_attribute/) return "fingerprint, key hashes";
  if (f ~ /^stage_receive|^stage_load|^tuplestore|^BufFile/) return "staging (tuplestores)";
  if (f ~ /^ledger_/) return "ledger";
  if (f ~ /^CommitTransaction/) return "commit";
  if (f ~ /^standard_planner|^pg_plan_query|^parse_analyze|^raw_parser|^_SPI_prepare_plan/) return "parse/plan";
  if (f ~ /^standard_ExecutorStart|^ExecInitNode/) return "executor start";
  return "";
}
NF == 0 { if (n) { c = ""; for (i = 1; i <= n; i++) { c = cat_of(fr[i]); if (c != "") break }
                   if (c == "") c = "other"; if (inetl) { cnt[c]++; tot++ } }
          n = 0; inetl = 0; next }
/^[^ \t]/ { next }
{ sub(/\+0x[0-9a-f]+$/, "", $2); fr[++n] = $2; if ($2 ~ /etl_upsert_batch/) inetl = 1 }
END { for (c in cnt) printf "%5.1f%%  %s\n", 100 * cnt[c] / tot, c | "sort -rn"; print tot " samples" }
