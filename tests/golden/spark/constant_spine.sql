-- python -m duckstream compile --dialect spark 'SELECT s.customer, COUNT(o.id) AS orders FROM VALUES (1), (2), (3) AS s(customer) LEFT JOIN orders AS o ON o.customer = s.customer GROUP BY s.customer'
-- features: aggregate, constant_relation, count, join, outer_join

-- create_cursors_table
SELECT 'duckstream: the cursors of dl.main.mv are the duckstream.cursor.<source> properties in the summary of its latest snapshot: SELECT summary FROM dl.main.mv.snapshots' AS cursors;

-- create_mv
CREATE OR REPLACE TABLE dl.main.mv AS SELECT _ivm_r.customer AS customer, _ivm_r._ivm_a0 AS orders, _ivm_r._ivm_count, _ivm_r._ivm_a0 FROM (SELECT s.customer AS customer, CAST(COUNT(*) AS BIGINT) AS _ivm_count, COUNT(o.id) AS _ivm_a0 FROM VALUES (1), (2), (3) AS s(customer) LEFT JOIN dl.main.orders AS o ON o.customer = s.customer WHERE FALSE GROUP BY s.customer) AS _ivm_r LIMIT 0;

-- initialize_cursors
SET spark.sql.optimizer.excludedRules = org.apache.spark.sql.catalyst.optimizer.RemoveNoopUnion;
-- the values below are the one row of:
-- SELECT e0 AS `duckstream.dl_main_mv.end_0`,
--   e0 AS `duckstream.dl_main_mv.cursor_0`
-- FROM (SELECT coalesce((SELECT snapshot_id FROM dl.main.orders.refs WHERE name = 'main'), raise_error('duckstream: source dl.main.orders has no snapshot (never written, or re-created): commit to it first, e.g. INSERT INTO <table> SELECT * FROM <table> WHERE false')) AS e0) AS pinned
SET duckstream.dl_main_mv.end_0 = <its value>;
SET duckstream.dl_main_mv.cursor_0 = <its value>;
-- commit the statement below with the snapshot properties duckstream.cursor.dl.main.orders = ${duckstream.dl_main_mv.end_0}
INSERT OVERWRITE TABLE dl.main.mv (customer, orders, _ivm_count, _ivm_a0) SELECT _ivm_r.customer AS customer, _ivm_r._ivm_a0 AS orders, _ivm_r._ivm_count, _ivm_r._ivm_a0 FROM (SELECT s.customer AS customer, CAST(COUNT(*) AS BIGINT) AS _ivm_count, COUNT(o.id) AS _ivm_a0 FROM VALUES (1), (2), (3) AS s(customer) LEFT JOIN (SELECT * FROM dl.main.orders VERSION AS OF ${duckstream.dl_main_mv.end_0}) AS o ON o.customer = s.customer GROUP BY s.customer) AS _ivm_r WHERE _ivm_r._ivm_count > 0;

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
CREATE OR REPLACE TEMPORARY VIEW _ivm_dl_main_mv_delta AS SELECT _ivm_g0, CAST(SUM(_ivm_mult) AS BIGINT) AS _ivm_count, SUM(COALESCE(CASE WHEN NOT _ivm_x0 IS NULL THEN _ivm_mult END, 0)) AS _ivm_a0 FROM (SELECT s.customer AS _ivm_g0, o.id AS _ivm_x0, o._ivm_mult AS _ivm_mult FROM VALUES (1), (2), (3) AS s(customer) JOIN (SELECT *, CAST(CASE WHEN _ivm_c._change_type = 'INSERT' THEN 1 ELSE -1 END AS BIGINT) AS _ivm_mult FROM _ivm_dl_main_mv_changelog_0 AS _ivm_c) AS o ON o.customer = s.customer WHERE (${duckstream.dl_main_mv.changed_0}) UNION ALL SELECT s.customer AS _ivm_g0, o.id AS _ivm_x0, CAST(1 AS BIGINT) AS _ivm_mult FROM VALUES (1), (2), (3) AS s(customer) LEFT JOIN (SELECT *, TRUE AS _ivm_present FROM (SELECT * FROM dl.main.orders VERSION AS OF ${duckstream.dl_main_mv.end_0}) AS o) AS o ON o.customer = s.customer WHERE (${duckstream.dl_main_mv.changed_0}) AND s.customer IN (SELECT o.customer FROM (SELECT *, CAST(CASE WHEN _ivm_c._change_type = 'INSERT' THEN 1 ELSE -1 END AS BIGINT) AS _ivm_mult FROM _ivm_dl_main_mv_changelog_0 AS _ivm_c) AS o) AND o._ivm_present IS NULL UNION ALL SELECT s.customer AS _ivm_g0, o.id AS _ivm_x0, CAST(-1 AS BIGINT) AS _ivm_mult FROM VALUES (1), (2), (3) AS s(customer) LEFT JOIN (SELECT *, TRUE AS _ivm_present FROM (SELECT * FROM dl.main.orders VERSION AS OF ${duckstream.dl_main_mv.cursor_0}) AS o) AS o ON o.customer = s.customer WHERE (${duckstream.dl_main_mv.changed_0}) AND s.customer IN (SELECT o.customer FROM (SELECT *, CAST(CASE WHEN _ivm_c._change_type = 'INSERT' THEN 1 ELSE -1 END AS BIGINT) AS _ivm_mult FROM _ivm_dl_main_mv_changelog_0 AS _ivm_c) AS o) AND o._ivm_present IS NULL) AS _ivm_net GROUP BY _ivm_g0;
CREATE OR REPLACE TEMPORARY VIEW _ivm_dl_main_mv_new AS SELECT d._ivm_g0 AS customer, COALESCE(o._ivm_count, 0) + d._ivm_count AS _ivm_count, COALESCE(o._ivm_a0, 0) + COALESCE(d._ivm_a0, 0) AS _ivm_a0 FROM _ivm_dl_main_mv_delta AS d LEFT JOIN dl.main.mv AS o ON o.customer IS NOT DISTINCT FROM d._ivm_g0;
-- commit the statement below with the snapshot properties duckstream.cursor.dl.main.orders = ${duckstream.dl_main_mv.end_0}
MERGE INTO dl.main.mv AS _ivm_t
USING (SELECT _ivm_r.customer AS customer, _ivm_r._ivm_a0 AS orders, _ivm_r._ivm_count, _ivm_r._ivm_a0, COALESCE((_ivm_r._ivm_count > 0), FALSE) AS _ivm_keep FROM (SELECT customer, _ivm_count, _ivm_a0 FROM _ivm_dl_main_mv_new) AS _ivm_r) AS _ivm_s
ON _ivm_t.`customer` <=> _ivm_s.`customer`
WHEN MATCHED AND NOT _ivm_s._ivm_keep THEN DELETE
WHEN MATCHED THEN UPDATE SET `customer` = _ivm_s.`customer`, `orders` = _ivm_s.`orders`, `_ivm_count` = _ivm_s.`_ivm_count`, `_ivm_a0` = _ivm_s.`_ivm_a0`
WHEN NOT MATCHED AND _ivm_s._ivm_keep THEN INSERT (`customer`, `orders`, `_ivm_count`, `_ivm_a0`) VALUES (_ivm_s.`customer`, _ivm_s.`orders`, _ivm_s.`_ivm_count`, _ivm_s.`_ivm_a0`);
DROP VIEW IF EXISTS _ivm_dl_main_mv_changelog_0;
DROP VIEW IF EXISTS _ivm_dl_main_mv_delta;
DROP VIEW IF EXISTS _ivm_dl_main_mv_new;

-- query_mv
SELECT customer, orders FROM dl.main.mv;
