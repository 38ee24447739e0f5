-- python -m duckstream compile --dialect spark 'WITH totals AS (SELECT customer, SUM(amount) AS total FROM orders GROUP BY customer) SELECT customer, total FROM totals WHERE total = (SELECT MAX(total) FROM totals)'
-- features: aggregate, derived_table, filter, join, project, self_join, subquery

-- create_cursors_table
SELECT 'duckstream: the cursors of dl.main.mv are the duckstream.cursor.<source> properties in the summary of its latest snapshot: SELECT summary FROM dl.main.mv.snapshots' AS cursors;

-- create_mv
CREATE OR REPLACE TABLE dl.main.mv AS SELECT _ivm_v.customer, _ivm_v.total, CAST(0 AS BIGINT) AS _ivm_row FROM (SELECT totals.customer AS customer, totals.total AS total FROM (SELECT orders.customer AS customer, SUM(orders.amount) AS total FROM dl.main.orders AS orders GROUP BY orders.customer) AS totals CROSS JOIN (SELECT MAX(totals.total) AS _ivm_v FROM (SELECT orders.customer AS customer, SUM(orders.amount) AS total FROM dl.main.orders AS orders GROUP BY orders.customer) AS totals) AS _ivm_sq1 WHERE totals.total = _ivm_sq1._ivm_v) AS _ivm_v WHERE FALSE LIMIT 0;

-- initialize_cursors
SET spark.sql.optimizer.excludedRules = org.apache.spark.sql.catalyst.optimizer.RemoveNoopUnion;
-- the values below are the one row of:
-- SELECT e0 AS `duckstream.dl_main_mv.end_0`,
--   e0 AS `duckstream.dl_main_mv.cursor_0`
-- FROM (SELECT coalesce((SELECT snapshot_id FROM dl.main.orders.refs WHERE name = 'main'), raise_error('duckstream: source dl.main.orders has no snapshot (never written, or re-created): commit to it first, e.g. INSERT INTO <table> SELECT * FROM <table> WHERE false')) AS e0) AS pinned
SET duckstream.dl_main_mv.end_0 = <its value>;
SET duckstream.dl_main_mv.cursor_0 = <its value>;
-- commit the statement below with the snapshot properties duckstream.cursor.dl.main.orders = ${duckstream.dl_main_mv.end_0}
INSERT OVERWRITE TABLE dl.main.mv (customer, total, _ivm_row) SELECT _ivm_v.customer, _ivm_v.total, (SELECT COALESCE(MAX(_ivm_row), 0) FROM dl.main.mv) + ROW_NUMBER() OVER (ORDER BY NULL NULLS LAST) AS _ivm_row FROM (SELECT totals.customer AS customer, totals.total AS total FROM (SELECT orders.customer AS customer, SUM(orders.amount) AS total FROM (SELECT * FROM dl.main.orders VERSION AS OF ${duckstream.dl_main_mv.end_0}) AS orders GROUP BY orders.customer) AS totals CROSS JOIN (SELECT MAX(totals.total) AS _ivm_v FROM (SELECT orders.customer AS customer, SUM(orders.amount) AS total FROM (SELECT * FROM dl.main.orders VERSION AS OF ${duckstream.dl_main_mv.end_0}) AS orders GROUP BY orders.customer) AS totals) AS _ivm_sq1 WHERE totals.total = _ivm_sq1._ivm_v) AS _ivm_v;

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
CREATE OR REPLACE TEMPORARY VIEW _ivm_dl_main_mv_delta AS WITH _ivm_affected_1 AS (SELECT DISTINCT _ivm_g0 FROM (SELECT orders.customer AS _ivm_g0 FROM (SELECT *, CAST(CASE WHEN _ivm_c._change_type = 'INSERT' THEN 1 ELSE -1 END AS BIGINT) AS _ivm_mult FROM _ivm_dl_main_mv_changelog_0 AS _ivm_c) AS orders WHERE (${duckstream.dl_main_mv.changed_0})) AS _ivm_delta), _ivm_affected_3 AS (SELECT DISTINCT _ivm_g0 FROM (SELECT orders.customer AS _ivm_g0 FROM (SELECT *, CAST(CASE WHEN _ivm_c._change_type = 'INSERT' THEN 1 ELSE -1 END AS BIGINT) AS _ivm_mult FROM _ivm_dl_main_mv_changelog_0 AS _ivm_c) AS orders WHERE (${duckstream.dl_main_mv.changed_0})) AS _ivm_delta), _ivm_affected_2 AS (SELECT DISTINCT _ivm_one FROM (SELECT 1 AS _ivm_one FROM (SELECT *, CAST(1 AS BIGINT) AS _ivm_mult FROM (SELECT orders.customer AS customer, SUM(orders.amount) AS total FROM (SELECT * FROM dl.main.orders VERSION AS OF ${duckstream.dl_main_mv.end_0}) AS orders WHERE (${duckstream.dl_main_mv.changed_0}) AND EXISTS(SELECT 1 FROM _ivm_affected_3 AS _ivm_a WHERE _ivm_a._ivm_g0 IS NOT DISTINCT FROM orders.customer) GROUP BY orders.customer) AS _ivm_g UNION ALL SELECT *, CAST(-1 AS BIGINT) AS _ivm_mult FROM (SELECT orders.customer AS customer, SUM(orders.amount) AS total FROM (SELECT * FROM dl.main.orders VERSION AS OF ${duckstream.dl_main_mv.cursor_0}) AS orders WHERE (${duckstream.dl_main_mv.changed_0}) AND EXISTS(SELECT 1 FROM _ivm_affected_3 AS _ivm_a WHERE _ivm_a._ivm_g0 IS NOT DISTINCT FROM orders.customer) GROUP BY orders.customer) AS _ivm_g) AS totals WHERE (${duckstream.dl_main_mv.changed_0})) AS _ivm_delta) SELECT *, ROW_NUMBER() OVER (ORDER BY NULL NULLS LAST) AS _ivm_id FROM (SELECT customer, total, CAST(SUM(_ivm_mult) AS BIGINT) AS _ivm_mult FROM (SELECT totals.customer AS customer, totals.total AS total, totals._ivm_mult AS _ivm_mult FROM (SELECT *, CAST(1 AS BIGINT) AS _ivm_mult FROM (SELECT orders.customer AS customer, SUM(orders.amount) AS total FROM (SELECT * FROM dl.main.orders VERSION AS OF ${duckstream.dl_main_mv.end_0}) AS orders WHERE (${duckstream.dl_main_mv.changed_0}) AND EXISTS(SELECT 1 FROM _ivm_affected_1 AS _ivm_a WHERE _ivm_a._ivm_g0 IS NOT DISTINCT FROM orders.customer) GROUP BY orders.customer) AS _ivm_g UNION ALL SELECT *, CAST(-1 AS BIGINT) AS _ivm_mult FROM (SELECT orders.customer AS customer, SUM(orders.amount) AS total FROM (SELECT * FROM dl.main.orders VERSION AS OF ${duckstream.dl_main_mv.cursor_0}) AS orders WHERE (${duckstream.dl_main_mv.changed_0}) AND EXISTS(SELECT 1 FROM _ivm_affected_1 AS _ivm_a WHERE _ivm_a._ivm_g0 IS NOT DISTINCT FROM orders.customer) GROUP BY orders.customer) AS _ivm_g) AS totals CROSS JOIN (SELECT MAX(totals.total) AS _ivm_v FROM (SELECT orders.customer AS customer, SUM(orders.amount) AS total FROM (SELECT * FROM dl.main.orders VERSION AS OF ${duckstream.dl_main_mv.cursor_0}) AS orders GROUP BY orders.customer) AS totals) AS _ivm_sq1 WHERE (${duckstream.dl_main_mv.changed_0}) AND totals.total = _ivm_sq1._ivm_v UNION ALL SELECT totals.customer AS customer, totals.total AS total, _ivm_sq1._ivm_mult AS _ivm_mult FROM (SELECT orders.customer AS customer, SUM(orders.amount) AS total FROM (SELECT * FROM dl.main.orders VERSION AS OF ${duckstream.dl_main_mv.end_0}) AS orders GROUP BY orders.customer) AS totals CROSS JOIN (SELECT *, CAST(1 AS BIGINT) AS _ivm_mult FROM (SELECT MAX(totals.total) AS _ivm_v FROM (SELECT orders.customer AS customer, SUM(orders.amount) AS total FROM (SELECT * FROM dl.main.orders VERSION AS OF ${duckstream.dl_main_mv.end_0}) AS orders GROUP BY orders.customer) AS totals WHERE (${duckstream.dl_main_mv.changed_0}) AND EXISTS(SELECT 1 FROM _ivm_affected_2 AS _ivm_a WHERE TRUE)) AS _ivm_g UNION ALL SELECT *, CAST(-1 AS BIGINT) AS _ivm_mult FROM (SELECT MAX(totals.total) AS _ivm_v FROM (SELECT orders.customer AS customer, SUM(orders.amount) AS total FROM (SELECT * FROM dl.main.orders VERSION AS OF ${duckstream.dl_main_mv.cursor_0}) AS orders GROUP BY orders.customer) AS totals WHERE (${duckstream.dl_main_mv.changed_0}) AND EXISTS(SELECT 1 FROM _ivm_affected_2 AS _ivm_a WHERE TRUE)) AS _ivm_g) AS _ivm_sq1 WHERE (${duckstream.dl_main_mv.changed_0}) AND totals.total = _ivm_sq1._ivm_v) AS _ivm_d GROUP BY customer, total HAVING SUM(_ivm_mult) <> 0) AS _ivm_n;
-- commit the statement below with the snapshot properties duckstream.cursor.dl.main.orders = ${duckstream.dl_main_mv.end_0}
MERGE INTO dl.main.mv AS _ivm_t
USING (SELECT NULL AS `customer`, NULL AS `total`, NULL AS `_ivm_row`, _ivm_k.`_ivm_row` AS _ivm_key0, true AS _ivm_del FROM (SELECT _ivm_row FROM (SELECT m._ivm_row, -d._ivm_mult AS _ivm_k, ROW_NUMBER() OVER (PARTITION BY d._ivm_id ORDER BY m._ivm_row NULLS LAST) AS _ivm_rn FROM dl.main.mv AS m JOIN _ivm_dl_main_mv_delta AS d ON m.customer IS NOT DISTINCT FROM d.customer AND m.total IS NOT DISTINCT FROM d.total WHERE d._ivm_mult < 0) AS _ivm_x WHERE _ivm_rn <= _ivm_k) AS _ivm_k
  UNION ALL
  SELECT _ivm_a.`customer`, _ivm_a.`total`, _ivm_a.`_ivm_row`, NULL AS _ivm_key0, false AS _ivm_del FROM (SELECT _ivm_v.customer, _ivm_v.total, (SELECT COALESCE(MAX(_ivm_row), 0) FROM dl.main.mv) + ROW_NUMBER() OVER (ORDER BY NULL NULLS LAST) AS _ivm_row FROM (SELECT d.customer, d.total, EXPLODE(SEQUENCE(1, d._ivm_mult)) AS _ivm_c FROM _ivm_dl_main_mv_delta AS d WHERE d._ivm_mult > 0) AS _ivm_v) AS _ivm_a) AS _ivm_s
ON _ivm_s._ivm_del AND _ivm_t.`_ivm_row` <=> _ivm_s._ivm_key0
WHEN MATCHED THEN DELETE
WHEN NOT MATCHED AND NOT _ivm_s._ivm_del THEN INSERT (`customer`, `total`, `_ivm_row`) VALUES (_ivm_s.`customer`, _ivm_s.`total`, _ivm_s.`_ivm_row`);
DROP VIEW IF EXISTS _ivm_dl_main_mv_changelog_0;
DROP VIEW IF EXISTS _ivm_dl_main_mv_delta;

-- query_mv
SELECT customer, total FROM dl.main.mv;
