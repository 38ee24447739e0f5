-- python -m duckstream compile --dialect spark 'SELECT id, amount FROM orders ORDER BY amount DESC, id NULLS LAST LIMIT 2'
-- features: project, top_k

-- create_cursors_table
SELECT 'duckstream: the cursors of dl.main.mv are the duckstream.cursor.<source> properties in the summary of its latest snapshot: SELECT summary FROM dl.main.mv.snapshots' AS cursors;

-- create_mv
CREATE OR REPLACE TABLE dl.main.mv AS SELECT _ivm_v.id, _ivm_v.amount, CAST(0 AS BIGINT) AS _ivm_row FROM (SELECT _ivm_top.id AS id, _ivm_top.amount AS amount FROM (SELECT _ivm_wi._ivm_c0 AS id, _ivm_wi._ivm_c1 AS amount, ROW_NUMBER() OVER (ORDER BY _ivm_wi._ivm_c1 DESC, _ivm_wi._ivm_c0 NULLS LAST, _ivm_wi._ivm_c0 NULLS LAST, _ivm_wi._ivm_c1 NULLS LAST) AS _ivm_rank FROM (SELECT _ivm_sorted.id AS _ivm_c0, _ivm_sorted.amount AS _ivm_c1 FROM (SELECT orders.id AS id, orders.amount AS amount FROM dl.main.orders AS orders) AS _ivm_sorted) AS _ivm_wi) AS _ivm_top WHERE _ivm_top._ivm_rank > 0 AND _ivm_top._ivm_rank <= 2) AS _ivm_v WHERE FALSE LIMIT 0;

-- initialize_cursors
SET spark.sql.optimizer.excludedRules = org.apache.spark.sql.catalyst.optimizer.RemoveNoopUnion;
-- the values below are the one row of:
-- SELECT e0 AS `duckstream.dl_main_mv.end_0`,
--   e0 AS `duckstream.dl_main_mv.cursor_0`
-- FROM (SELECT coalesce((SELECT snapshot_id FROM dl.main.orders.refs WHERE name = 'main'), raise_error('duckstream: source dl.main.orders has no snapshot (never written, or re-created): commit to it first, e.g. INSERT INTO <table> SELECT * FROM <table> WHERE false')) AS e0) AS pinned
SET duckstream.dl_main_mv.end_0 = <its value>;
SET duckstream.dl_main_mv.cursor_0 = <its value>;
-- commit the statement below with the snapshot properties duckstream.cursor.dl.main.orders = ${duckstream.dl_main_mv.end_0}
INSERT OVERWRITE TABLE dl.main.mv (id, amount, _ivm_row) SELECT _ivm_v.id, _ivm_v.amount, (SELECT COALESCE(MAX(_ivm_row), 0) FROM dl.main.mv) + ROW_NUMBER() OVER (ORDER BY NULL NULLS LAST) AS _ivm_row FROM (SELECT _ivm_top.id AS id, _ivm_top.amount AS amount FROM (SELECT _ivm_wi._ivm_c0 AS id, _ivm_wi._ivm_c1 AS amount, ROW_NUMBER() OVER (ORDER BY _ivm_wi._ivm_c1 DESC, _ivm_wi._ivm_c0 NULLS LAST, _ivm_wi._ivm_c0 NULLS LAST, _ivm_wi._ivm_c1 NULLS LAST) AS _ivm_rank FROM (SELECT _ivm_sorted.id AS _ivm_c0, _ivm_sorted.amount AS _ivm_c1 FROM (SELECT orders.id AS id, orders.amount AS amount FROM (SELECT * FROM dl.main.orders VERSION AS OF ${duckstream.dl_main_mv.end_0}) AS orders) AS _ivm_sorted) AS _ivm_wi) AS _ivm_top WHERE _ivm_top._ivm_rank > 0 AND _ivm_top._ivm_rank <= 2) AS _ivm_v;

-- maintain
SET spark.sql.optimizer.excludedRules = org.apache.spark.sql.catalyst.optimizer.RemoveNoopUnion;
-- the values below are the one row of:
-- SELECT e0 AS `duckstream.dl_main_mv.end_0`,
--   c0 AS `duckstream.dl_main_mv.cursor_0`,
--   e0 <> c0 AS `duckstream.dl_main_mv.changed_0`,
--   e0 <> c0 AS `duckstream.dl_main_mv.changed`
-- FROM (SELECT coalesce((SELECT snapshot_id FROM dl.main.orders.refs WHERE name = 'main'), raise_error('duckstream: source dl.main.orders has no snapshot (never written, or re-created): commit to it first, e.g. INSERT INTO <table> SELECT * FROM <table> WHERE false')) AS e0,
--     coalesce(CAST(mv.summary['duckstream.cursor.dl.main.orders'] AS BIGINT), raise_error('duckstream: rebuild required: no cursor for source dl.main.orders in the snapshots of dl.main.mv (not initialized, or the table was written outside duckstream)')) AS c0
--   FROM (SELECT max_by(s.summary, struct(s.snapshot_id = r.snapshot_id, h.made_current_at)) AS summary FROM dl.main.mv.snapshots AS s JOIN dl.main.mv.history AS h ON s.snapshot_id = h.snapshot_id CROSS JOIN dl.main.mv.refs AS r WHERE r.name = 'main' AND h.is_current_ancestor AND s.operation <> 'replace') AS mv) AS pinned
SET duckstream.dl_main_mv.end_0 = <its value>;
SET duckstream.dl_main_mv.cursor_0 = <its value>;
SET duckstream.dl_main_mv.changed_0 = <its value>;
SET duckstream.dl_main_mv.changed = <its value>;
SELECT CASE
    WHEN (SELECT count(*) FROM dl.main.orders.history WHERE snapshot_id = ${duckstream.dl_main_mv.cursor_0} AND is_current_ancestor) = 0
      THEN raise_error('duckstream: rebuild required: the cursor snapshot of dl.main.orders is no longer in its history: expired, or the table was re-created, replaced or rolled back')
    WHEN (SELECT min_by(latest_schema_id, timestamp) FROM dl.main.orders.metadata_log_entries WHERE latest_snapshot_id = ${duckstream.dl_main_mv.cursor_0}) <> (SELECT max_by(latest_schema_id, timestamp) FROM dl.main.orders.metadata_log_entries)
      THEN raise_error('duckstream: rebuild required: the schema of dl.main.orders changed')
  END AS `dl.main.orders`;
-- stop here (run only the clean-up) unless ${duckstream.dl_main_mv.changed} is true;
CALL dl.system.create_changelog_view(table => 'main.orders', options => map('start-snapshot-id', '${duckstream.dl_main_mv.cursor_0}', 'end-snapshot-id', '${duckstream.dl_main_mv.end_0}'), changelog_view => '_ivm_dl_main_mv_changelog_0');
CREATE OR REPLACE TEMPORARY VIEW _ivm_dl_main_mv_delta AS WITH _ivm_kept_1 AS (SELECT _ivm_c0, _ivm_c1, ROW_NUMBER() OVER (ORDER BY _ivm_c1 DESC, _ivm_c0 NULLS LAST, _ivm_c0 NULLS LAST, _ivm_c1 NULLS LAST) AS _ivm_k FROM (SELECT _ivm_v.id AS _ivm_c0, _ivm_v.amount AS _ivm_c1 FROM (SELECT id, amount FROM dl.main.mv) AS _ivm_v WHERE (${duckstream.dl_main_mv.changed_0})) AS _ivm_o), _ivm_ranked_1 AS (SELECT _ivm_c0, _ivm_c1, _ivm_n, _ivm_last, SUM(_ivm_n) OVER (ORDER BY _ivm_c1 DESC, _ivm_c0 NULLS LAST, _ivm_c0 NULLS LAST, _ivm_c1 NULLS LAST, _ivm_last NULLS LAST ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS _ivm_upto FROM (SELECT _ivm_c0, _ivm_c1, _ivm_n, 0 AS _ivm_last FROM (SELECT _ivm_c0, _ivm_c1, CAST(SUM(_ivm_n) AS BIGINT) AS _ivm_n FROM (SELECT _ivm_c0, _ivm_c1, CAST(1 AS BIGINT) AS _ivm_n FROM _ivm_kept_1 AS _ivm_kept UNION ALL SELECT _ivm_wi._ivm_c0 AS _ivm_c0, _ivm_wi._ivm_c1 AS _ivm_c1, _ivm_wi._ivm_mult AS _ivm_n FROM (SELECT _ivm_sorted.id AS _ivm_c0, _ivm_sorted.amount AS _ivm_c1, _ivm_sorted._ivm_mult AS _ivm_mult FROM (SELECT orders.id AS id, orders.amount AS amount, orders._ivm_mult AS _ivm_mult FROM (SELECT *, CAST(CASE WHEN _ivm_c._change_type = 'INSERT' THEN 1 ELSE -1 END AS BIGINT) AS _ivm_mult FROM _ivm_dl_main_mv_changelog_0 AS _ivm_c) AS orders WHERE (${duckstream.dl_main_mv.changed_0})) AS _ivm_sorted WHERE (${duckstream.dl_main_mv.changed_0})) AS _ivm_wi WHERE (${duckstream.dl_main_mv.changed_0})) AS _ivm_u GROUP BY _ivm_c0, _ivm_c1 HAVING SUM(_ivm_n) > 0) AS _ivm_s UNION ALL SELECT _ivm_c0, _ivm_c1, CAST(0 AS BIGINT) AS _ivm_n, 1 AS _ivm_last FROM _ivm_kept_1 WHERE _ivm_k > 1 AND _ivm_k <= 2) AS _ivm_r), _ivm_decided_1 AS (SELECT COALESCE(MAX(_ivm_upto), 2) >= 2 AS _ivm_decided FROM _ivm_ranked_1 WHERE _ivm_last = 1) SELECT *, ROW_NUMBER() OVER (ORDER BY NULL NULLS LAST) AS _ivm_id FROM (SELECT id, amount, CAST(SUM(_ivm_mult) AS BIGINT) AS _ivm_mult FROM (SELECT _ivm_c._ivm_c0 AS id, _ivm_c._ivm_c1 AS amount, LEAST(_ivm_c._ivm_upto, 2) - GREATEST(_ivm_c._ivm_upto - _ivm_c._ivm_n, 0) AS _ivm_mult FROM _ivm_ranked_1 AS _ivm_c WHERE _ivm_c._ivm_last = 0 AND _ivm_c._ivm_upto - _ivm_c._ivm_n < 2 AND _ivm_c._ivm_upto > 0 AND EXISTS(SELECT 1 FROM _ivm_decided_1 WHERE _ivm_decided) UNION ALL SELECT _ivm_f.id, _ivm_f.amount, CAST(1 AS BIGINT) AS _ivm_mult FROM (SELECT _ivm_top.id AS id, _ivm_top.amount AS amount FROM (SELECT _ivm_wi._ivm_c0 AS id, _ivm_wi._ivm_c1 AS amount, ROW_NUMBER() OVER (ORDER BY _ivm_wi._ivm_c1 DESC, _ivm_wi._ivm_c0 NULLS LAST, _ivm_wi._ivm_c0 NULLS LAST, _ivm_wi._ivm_c1 NULLS LAST) AS _ivm_rank FROM (SELECT _ivm_sorted.id AS _ivm_c0, _ivm_sorted.amount AS _ivm_c1 FROM (SELECT orders.id AS id, orders.amount AS amount FROM (SELECT * FROM dl.main.orders VERSION AS OF ${duckstream.dl_main_mv.end_0}) AS orders WHERE EXISTS(SELECT 1 FROM _ivm_decided_1 WHERE NOT _ivm_decided)) AS _ivm_sorted WHERE EXISTS(SELECT 1 FROM _ivm_decided_1 WHERE NOT _ivm_decided)) AS _ivm_wi WHERE EXISTS(SELECT 1 FROM _ivm_decided_1 WHERE NOT _ivm_decided)) AS _ivm_top WHERE _ivm_top._ivm_rank > 0 AND _ivm_top._ivm_rank <= 2) AS _ivm_f WHERE (${duckstream.dl_main_mv.changed_0}) AND EXISTS(SELECT 1 FROM _ivm_decided_1 WHERE NOT _ivm_decided) UNION ALL SELECT _ivm_o._ivm_c0 AS id, _ivm_o._ivm_c1 AS amount, CAST(-1 AS BIGINT) AS _ivm_mult FROM _ivm_kept_1 AS _ivm_o) AS _ivm_d GROUP BY id, amount HAVING SUM(_ivm_mult) <> 0) AS _ivm_n;
-- commit the statement below with the snapshot properties duckstream.cursor.dl.main.orders = ${duckstream.dl_main_mv.end_0}
MERGE INTO dl.main.mv AS _ivm_t
USING (SELECT NULL AS `id`, NULL AS `amount`, NULL AS `_ivm_row`, _ivm_k.`_ivm_row` AS _ivm_key0, true AS _ivm_del FROM (SELECT _ivm_row FROM (SELECT m._ivm_row, -d._ivm_mult AS _ivm_k, ROW_NUMBER() OVER (PARTITION BY d._ivm_id ORDER BY m._ivm_row NULLS LAST) AS _ivm_rn FROM dl.main.mv AS m JOIN _ivm_dl_main_mv_delta AS d ON m.id IS NOT DISTINCT FROM d.id AND m.amount IS NOT DISTINCT FROM d.amount WHERE d._ivm_mult < 0) AS _ivm_x WHERE _ivm_rn <= _ivm_k) AS _ivm_k
  UNION ALL
  SELECT _ivm_a.`id`, _ivm_a.`amount`, _ivm_a.`_ivm_row`, NULL AS _ivm_key0, false AS _ivm_del FROM (SELECT _ivm_v.id, _ivm_v.amount, (SELECT COALESCE(MAX(_ivm_row), 0) FROM dl.main.mv) + ROW_NUMBER() OVER (ORDER BY NULL NULLS LAST) AS _ivm_row FROM (SELECT d.id, d.amount, EXPLODE(SEQUENCE(1, d._ivm_mult)) AS _ivm_c FROM _ivm_dl_main_mv_delta AS d WHERE d._ivm_mult > 0) AS _ivm_v) AS _ivm_a) AS _ivm_s
ON _ivm_s._ivm_del AND _ivm_t.`_ivm_row` <=> _ivm_s._ivm_key0
WHEN MATCHED THEN DELETE
WHEN NOT MATCHED AND NOT _ivm_s._ivm_del THEN INSERT (`id`, `amount`, `_ivm_row`) VALUES (_ivm_s.`id`, _ivm_s.`amount`, _ivm_s.`_ivm_row`);
DROP VIEW IF EXISTS _ivm_dl_main_mv_changelog_0;
DROP VIEW IF EXISTS _ivm_dl_main_mv_delta;

-- query_mv
SELECT id, amount FROM dl.main.mv;
