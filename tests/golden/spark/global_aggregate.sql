-- python -m duckstream compile --dialect spark 'SELECT COUNT(*) AS n, SUM(amount) AS total, MAX(amount) AS highest FROM orders'
-- features: aggregate, count, global_aggregate, max, sum

-- create_cursors_table
SELECT 'duckstream: the cursors of dl.main.mv are the duckstream.cursor.<source> properties in the summary of its latest snapshot: SELECT summary FROM dl.main.mv.snapshots' AS cursors;

-- create_mv
CREATE OR REPLACE TABLE dl.main.mv AS SELECT _ivm_r._ivm_count AS n, CASE WHEN _ivm_r._ivm_a1_n > 0 THEN _ivm_r._ivm_a1 END AS total, _ivm_r._ivm_a2 AS highest, _ivm_r._ivm_count, _ivm_r._ivm_a1, _ivm_r._ivm_a1_n, _ivm_r._ivm_a2 FROM (SELECT CAST(COUNT(*) AS BIGINT) AS _ivm_count, SUM(orders.amount) AS _ivm_a1, COUNT(orders.amount) AS _ivm_a1_n, MAX(orders.amount) AS _ivm_a2 FROM dl.main.orders AS orders WHERE FALSE) AS _ivm_r LIMIT 0;

-- initialize_cursors
SET spark.sql.optimizer.excludedRules = org.apache.spark.sql.catalyst.optimizer.RemoveNoopUnion;
-- the values below are the one row of:
-- SELECT e0 AS `duckstream.dl_main_mv.end_0`,
--   e0 AS `duckstream.dl_main_mv.cursor_0`
-- FROM (SELECT coalesce((SELECT snapshot_id FROM dl.main.orders.refs WHERE name = 'main'), raise_error('duckstream: source dl.main.orders has no snapshot (never written, or re-created): commit to it first, e.g. INSERT INTO <table> SELECT * FROM <table> WHERE false')) AS e0) AS pinned
SET duckstream.dl_main_mv.end_0 = <its value>;
SET duckstream.dl_main_mv.cursor_0 = <its value>;
-- commit the statement below with the snapshot properties duckstream.cursor.dl.main.orders = ${duckstream.dl_main_mv.end_0}
INSERT OVERWRITE TABLE dl.main.mv (n, total, highest, _ivm_count, _ivm_a1, _ivm_a1_n, _ivm_a2) SELECT _ivm_r._ivm_count AS n, CASE WHEN _ivm_r._ivm_a1_n > 0 THEN _ivm_r._ivm_a1 END AS total, _ivm_r._ivm_a2 AS highest, _ivm_r._ivm_count, _ivm_r._ivm_a1, _ivm_r._ivm_a1_n, _ivm_r._ivm_a2 FROM (SELECT CAST(COUNT(*) AS BIGINT) AS _ivm_count, SUM(orders.amount) AS _ivm_a1, COUNT(orders.amount) AS _ivm_a1_n, MAX(orders.amount) AS _ivm_a2 FROM (SELECT * FROM dl.main.orders VERSION AS OF ${duckstream.dl_main_mv.end_0}) AS orders) AS _ivm_r;

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
CREATE OR REPLACE TEMPORARY VIEW _ivm_dl_main_mv_delta AS SELECT CAST(SUM(_ivm_mult) AS BIGINT) AS _ivm_count, SUM(_ivm_x1 * _ivm_mult) AS _ivm_a1, SUM(COALESCE(CASE WHEN NOT _ivm_x1 IS NULL THEN _ivm_mult END, 0)) AS _ivm_a1_n, MAX(CASE WHEN _ivm_mult > 0 THEN _ivm_x2 END) AS _ivm_a2_ins, MAX(CASE WHEN _ivm_mult < 0 THEN _ivm_x2 END) AS _ivm_a2_del FROM (SELECT _ivm_x1, _ivm_x2, SUM(_ivm_mult) AS _ivm_mult FROM (SELECT orders.amount AS _ivm_x1, orders.amount AS _ivm_x2, orders._ivm_mult AS _ivm_mult FROM (SELECT *, CAST(CASE WHEN _ivm_c._change_type = 'INSERT' THEN 1 ELSE -1 END AS BIGINT) AS _ivm_mult FROM _ivm_dl_main_mv_changelog_0 AS _ivm_c) AS orders WHERE (${duckstream.dl_main_mv.changed_0})) AS _ivm_dv GROUP BY _ivm_x1, _ivm_x2 HAVING SUM(_ivm_mult) <> 0) AS _ivm_net HAVING COUNT(*) > 0;
CREATE OR REPLACE TEMPORARY VIEW _ivm_dl_main_mv_new AS SELECT COALESCE(o._ivm_count, 0) + d._ivm_count AS _ivm_count, COALESCE(o._ivm_a1, 0) + COALESCE(d._ivm_a1, 0) AS _ivm_a1, COALESCE(o._ivm_a1_n, 0) + COALESCE(d._ivm_a1_n, 0) AS _ivm_a1_n, GREATEST(o._ivm_a2, d._ivm_a2_ins) AS _ivm_a2, COALESCE((NOT d._ivm_a2_del IS NULL AND (o._ivm_a2 IS NULL OR d._ivm_a2_del >= o._ivm_a2)), FALSE) AS _ivm_rescan FROM _ivm_dl_main_mv_delta AS d LEFT JOIN dl.main.mv AS o ON TRUE;
-- the values below are the one row of:
-- SELECT (SELECT COUNT(*) FROM _ivm_dl_main_mv_new WHERE _ivm_rescan) AS `duckstream.dl_main_mv.rescans`
SET duckstream.dl_main_mv.rescans = <its value>;
CREATE OR REPLACE TEMPORARY VIEW _ivm_dl_main_mv_rescan AS SELECT _ivm_count, _ivm_a1, _ivm_a1_n, _ivm_a2 FROM (SELECT CAST(COUNT(*) AS BIGINT) AS _ivm_count, SUM(orders.amount) AS _ivm_a1, COUNT(orders.amount) AS _ivm_a1_n, MAX(orders.amount) AS _ivm_a2 FROM (SELECT * FROM dl.main.orders VERSION AS OF ${duckstream.dl_main_mv.end_0}) AS orders WHERE ${duckstream.dl_main_mv.rescans} > 0 AND EXISTS(SELECT 1 FROM (SELECT 1 AS _ivm_one FROM _ivm_dl_main_mv_new WHERE _ivm_rescan) AS _ivm_a WHERE TRUE)) AS _ivm_s WHERE ${duckstream.dl_main_mv.rescans} > 0;
-- commit the statement below with the snapshot properties duckstream.cursor.dl.main.orders = ${duckstream.dl_main_mv.end_0}
MERGE INTO dl.main.mv AS _ivm_t
USING (SELECT NULL AS `n`, NULL AS `total`, NULL AS `highest`, NULL AS `_ivm_count`, NULL AS `_ivm_a1`, NULL AS `_ivm_a1_n`, NULL AS `_ivm_a2`, true AS _ivm_del FROM (SELECT 1 FROM _ivm_dl_main_mv_new) AS _ivm_k
  UNION ALL
  SELECT _ivm_a.`n`, _ivm_a.`total`, _ivm_a.`highest`, _ivm_a.`_ivm_count`, _ivm_a.`_ivm_a1`, _ivm_a.`_ivm_a1_n`, _ivm_a.`_ivm_a2`, false AS _ivm_del FROM (SELECT _ivm_r._ivm_count AS n, CASE WHEN _ivm_r._ivm_a1_n > 0 THEN _ivm_r._ivm_a1 END AS total, _ivm_r._ivm_a2 AS highest, _ivm_r._ivm_count, _ivm_r._ivm_a1, _ivm_r._ivm_a1_n, _ivm_r._ivm_a2 FROM (SELECT _ivm_count, _ivm_a1, _ivm_a1_n, _ivm_a2 FROM _ivm_dl_main_mv_new WHERE NOT _ivm_rescan UNION ALL SELECT _ivm_count, _ivm_a1, _ivm_a1_n, _ivm_a2 FROM _ivm_dl_main_mv_rescan) AS _ivm_r) AS _ivm_a) AS _ivm_s
ON _ivm_s._ivm_del
WHEN MATCHED THEN DELETE
WHEN NOT MATCHED AND NOT _ivm_s._ivm_del THEN INSERT (`n`, `total`, `highest`, `_ivm_count`, `_ivm_a1`, `_ivm_a1_n`, `_ivm_a2`) VALUES (_ivm_s.`n`, _ivm_s.`total`, _ivm_s.`highest`, _ivm_s.`_ivm_count`, _ivm_s.`_ivm_a1`, _ivm_s.`_ivm_a1_n`, _ivm_s.`_ivm_a2`);
DROP VIEW IF EXISTS _ivm_dl_main_mv_changelog_0;
DROP VIEW IF EXISTS _ivm_dl_main_mv_delta;
DROP VIEW IF EXISTS _ivm_dl_main_mv_new;
DROP VIEW IF EXISTS _ivm_dl_main_mv_rescan;

-- query_mv
SELECT n, total, highest FROM dl.main.mv;
