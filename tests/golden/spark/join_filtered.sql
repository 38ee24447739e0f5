-- python -m duckstream compile --dialect spark 'SELECT o.id, c.region FROM orders AS o JOIN customers AS c ON o.customer = c.id WHERE o.amount >= 10 AND (c.region = '"'"'north'"'"' OR c.region IS NULL)'
-- features: filter, join, project

-- create_cursors_table
SELECT 'duckstream: the cursors of dl.main.mv are the duckstream.cursor.<source> properties in the summary of its latest snapshot: SELECT summary FROM dl.main.mv.snapshots' AS cursors;

-- create_mv
CREATE OR REPLACE TABLE dl.main.mv AS SELECT _ivm_v.id, _ivm_v.region, CAST(0 AS BIGINT) AS _ivm_row FROM (SELECT o.id AS id, c.region AS region FROM dl.main.orders AS o JOIN dl.main.customers AS c ON o.customer = c.id WHERE o.amount >= 10 AND (c.region = 'north' OR c.region IS NULL)) AS _ivm_v WHERE FALSE LIMIT 0;

-- initialize_cursors
SET spark.sql.optimizer.excludedRules = org.apache.spark.sql.catalyst.optimizer.RemoveNoopUnion;
-- the values below are the one row of:
-- SELECT e0 AS `duckstream.dl_main_mv.end_0`,
--   e0 AS `duckstream.dl_main_mv.cursor_0`,
--   e1 AS `duckstream.dl_main_mv.end_1`,
--   e1 AS `duckstream.dl_main_mv.cursor_1`
-- FROM (SELECT coalesce((SELECT snapshot_id FROM dl.main.orders.refs WHERE name = 'main'), raise_error('duckstream: source dl.main.orders has no snapshot (never written, or re-created): commit to it first, e.g. INSERT INTO <table> SELECT * FROM <table> WHERE false')) AS e0, coalesce((SELECT snapshot_id FROM dl.main.customers.refs WHERE name = 'main'), raise_error('duckstream: source dl.main.customers has no snapshot (never written, or re-created): commit to it first, e.g. INSERT INTO <table> SELECT * FROM <table> WHERE false')) AS e1) AS pinned
SET duckstream.dl_main_mv.end_0 = <its value>;
SET duckstream.dl_main_mv.cursor_0 = <its value>;
SET duckstream.dl_main_mv.end_1 = <its value>;
SET duckstream.dl_main_mv.cursor_1 = <its value>;
-- commit the statement below with the snapshot properties duckstream.cursor.dl.main.orders = ${duckstream.dl_main_mv.end_0}, duckstream.cursor.dl.main.customers = ${duckstream.dl_main_mv.end_1}
INSERT OVERWRITE TABLE dl.main.mv (id, region, _ivm_row) SELECT _ivm_v.id, _ivm_v.region, (SELECT COALESCE(MAX(_ivm_row), 0) FROM dl.main.mv) + ROW_NUMBER() OVER (ORDER BY NULL NULLS LAST) AS _ivm_row FROM (SELECT o.id AS id, c.region AS region FROM (SELECT * FROM dl.main.orders VERSION AS OF ${duckstream.dl_main_mv.end_0}) AS o JOIN (SELECT * FROM dl.main.customers VERSION AS OF ${duckstream.dl_main_mv.end_1}) AS c ON o.customer = c.id WHERE o.amount >= 10 AND (c.region = 'north' OR c.region IS NULL)) AS _ivm_v;

-- maintain
SET spark.sql.optimizer.excludedRules = org.apache.spark.sql.catalyst.optimizer.RemoveNoopUnion;
-- the values below are the one row of:
-- SELECT e0 AS `duckstream.dl_main_mv.end_0`,
--   c0 AS `duckstream.dl_main_mv.cursor_0`,
--   e0 <> c0 AS `duckstream.dl_main_mv.changed_0`,
--   e1 AS `duckstream.dl_main_mv.end_1`,
--   c1 AS `duckstream.dl_main_mv.cursor_1`,
--   e1 <> c1 AS `duckstream.dl_main_mv.changed_1`,
--   e0 <> c0 OR e1 <> c1 AS `duckstream.dl_main_mv.changed`
-- FROM (SELECT coalesce((SELECT snapshot_id FROM dl.main.orders.refs WHERE name = 'main'), raise_error('duckstream: source dl.main.orders has no snapshot (never written, or re-created): commit to it first, e.g. INSERT INTO <table> SELECT * FROM <table> WHERE false')) AS e0,
--     coalesce(CAST(mv.summary['duckstream.cursor.dl.main.orders'] AS BIGINT), raise_error('duckstream: rebuild required: no cursor for source dl.main.orders in the snapshots of dl.main.mv (not initialized, or the table was written outside duckstream)')) AS c0,
--     coalesce((SELECT snapshot_id FROM dl.main.customers.refs WHERE name = 'main'), raise_error('duckstream: source dl.main.customers has no snapshot (never written, or re-created): commit to it first, e.g. INSERT INTO <table> SELECT * FROM <table> WHERE false')) AS e1,
--     coalesce(CAST(mv.summary['duckstream.cursor.dl.main.customers'] AS BIGINT), raise_error('duckstream: rebuild required: no cursor for source dl.main.customers in the snapshots of dl.main.mv (not initialized, or the table was written outside duckstream)')) AS c1
--   FROM (SELECT max_by(s.summary, struct(s.snapshot_id = r.snapshot_id, h.made_current_at)) AS summary FROM dl.main.mv.snapshots AS s JOIN dl.main.mv.history AS h ON s.snapshot_id = h.snapshot_id CROSS JOIN dl.main.mv.refs AS r WHERE r.name = 'main' AND h.is_current_ancestor AND s.operation <> 'replace') AS mv) AS pinned
SET duckstream.dl_main_mv.end_0 = <its value>;
SET duckstream.dl_main_mv.cursor_0 = <its value>;
SET duckstream.dl_main_mv.changed_0 = <its value>;
SET duckstream.dl_main_mv.end_1 = <its value>;
SET duckstream.dl_main_mv.cursor_1 = <its value>;
SET duckstream.dl_main_mv.changed_1 = <its value>;
SET duckstream.dl_main_mv.changed = <its value>;
SELECT CASE
    WHEN (SELECT count(*) FROM dl.main.orders.history WHERE snapshot_id = ${duckstream.dl_main_mv.cursor_0} AND is_current_ancestor) = 0
      THEN raise_error('duckstream: rebuild required: the cursor snapshot of dl.main.orders is no longer in its history: expired, or the table was re-created, replaced or rolled back')
    WHEN (SELECT min_by(latest_schema_id, timestamp) FROM dl.main.orders.metadata_log_entries WHERE latest_snapshot_id = ${duckstream.dl_main_mv.cursor_0}) <> (SELECT max_by(latest_schema_id, timestamp) FROM dl.main.orders.metadata_log_entries)
      THEN raise_error('duckstream: rebuild required: the schema of dl.main.orders changed')
  END AS `dl.main.orders`,
  CASE
    WHEN (SELECT count(*) FROM dl.main.customers.history WHERE snapshot_id = ${duckstream.dl_main_mv.cursor_1} AND is_current_ancestor) = 0
      THEN raise_error('duckstream: rebuild required: the cursor snapshot of dl.main.customers is no longer in its history: expired, or the table was re-created, replaced or rolled back')
    WHEN (SELECT min_by(latest_schema_id, timestamp) FROM dl.main.customers.metadata_log_entries WHERE latest_snapshot_id = ${duckstream.dl_main_mv.cursor_1}) <> (SELECT max_by(latest_schema_id, timestamp) FROM dl.main.customers.metadata_log_entries)
      THEN raise_error('duckstream: rebuild required: the schema of dl.main.customers changed')
  END AS `dl.main.customers`;
-- stop here (run only the clean-up) unless ${duckstream.dl_main_mv.changed} is true;
CALL dl.system.create_changelog_view(table => 'main.orders', options => map('start-snapshot-id', '${duckstream.dl_main_mv.cursor_0}', 'end-snapshot-id', '${duckstream.dl_main_mv.end_0}'), changelog_view => '_ivm_dl_main_mv_changelog_0');
CALL dl.system.create_changelog_view(table => 'main.customers', options => map('start-snapshot-id', '${duckstream.dl_main_mv.cursor_1}', 'end-snapshot-id', '${duckstream.dl_main_mv.end_1}'), changelog_view => '_ivm_dl_main_mv_changelog_1');
-- the bounds of the changed keys (for the range filters on the states they join): each value
-- as a literal of the key's type (42, DATE '1995-03-15', 'text'), NULL for no bound. The runner reads
-- them from the column bounds of the window's data files instead (no Spark job).
-- the values below are the one row of:
-- SELECT *
-- FROM (SELECT min(customer) AS `duckstream.dl_main_mv.range_0_0_low`, max(customer) AS `duckstream.dl_main_mv.range_0_0_high` FROM _ivm_dl_main_mv_changelog_0) AS r0
--   CROSS JOIN (SELECT min(id) AS `duckstream.dl_main_mv.range_1_1_low`, max(id) AS `duckstream.dl_main_mv.range_1_1_high` FROM _ivm_dl_main_mv_changelog_1) AS r1
SET duckstream.dl_main_mv.range_0_0_low = <its value>;
SET duckstream.dl_main_mv.range_0_0_high = <its value>;
SET duckstream.dl_main_mv.range_1_1_low = <its value>;
SET duckstream.dl_main_mv.range_1_1_high = <its value>;
CREATE OR REPLACE TEMPORARY VIEW _ivm_dl_main_mv_delta AS SELECT *, ROW_NUMBER() OVER (ORDER BY NULL NULLS LAST) AS _ivm_id FROM (SELECT id, region, CAST(SUM(_ivm_mult) AS BIGINT) AS _ivm_mult FROM (SELECT o.id AS id, c.region AS region, o._ivm_mult AS _ivm_mult FROM (SELECT *, CAST(CASE WHEN _ivm_c._change_type = 'INSERT' THEN 1 ELSE -1 END AS BIGINT) AS _ivm_mult FROM _ivm_dl_main_mv_changelog_0 AS _ivm_c) AS o JOIN (SELECT * FROM dl.main.customers VERSION AS OF ${duckstream.dl_main_mv.cursor_1}) AS c ON o.customer = c.id WHERE (${duckstream.dl_main_mv.changed_0}) AND (o.amount >= 10 AND (c.region = 'north' OR c.region IS NULL)) AND c.id BETWEEN COALESCE(${duckstream.dl_main_mv.range_0_0_low}, c.id) AND COALESCE(${duckstream.dl_main_mv.range_0_0_high}, c.id) UNION ALL SELECT o.id AS id, c.region AS region, c._ivm_mult AS _ivm_mult FROM (SELECT * FROM dl.main.orders VERSION AS OF ${duckstream.dl_main_mv.end_0}) AS o JOIN (SELECT *, CAST(CASE WHEN _ivm_c._change_type = 'INSERT' THEN 1 ELSE -1 END AS BIGINT) AS _ivm_mult FROM _ivm_dl_main_mv_changelog_1 AS _ivm_c) AS c ON o.customer = c.id WHERE (${duckstream.dl_main_mv.changed_1}) AND (o.amount >= 10 AND (c.region = 'north' OR c.region IS NULL)) AND o.customer BETWEEN COALESCE(${duckstream.dl_main_mv.range_1_1_low}, o.customer) AND COALESCE(${duckstream.dl_main_mv.range_1_1_high}, o.customer)) AS _ivm_d GROUP BY id, region HAVING SUM(_ivm_mult) <> 0) AS _ivm_n;
-- commit the statement below with the snapshot properties duckstream.cursor.dl.main.orders = ${duckstream.dl_main_mv.end_0}, duckstream.cursor.dl.main.customers = ${duckstream.dl_main_mv.end_1}
-- (when every changed source's snapshots since its cursor are appends, run instead, with the same properties:
-- INSERT INTO dl.main.mv (`id`, `region`, `_ivm_row`)
-- SELECT _ivm_v.id, _ivm_v.region, (SELECT COALESCE(MAX(_ivm_row), 0) FROM dl.main.mv) + ROW_NUMBER() OVER (ORDER BY NULL NULLS LAST) AS _ivm_row FROM (SELECT d.id, d.region, EXPLODE(SEQUENCE(1, d._ivm_mult)) AS _ivm_c FROM (SELECT o.id AS id, c.region AS region, o._ivm_mult AS _ivm_mult FROM (SELECT *, CAST(CASE WHEN _ivm_c._change_type = 'INSERT' THEN 1 ELSE -1 END AS BIGINT) AS _ivm_mult FROM _ivm_dl_main_mv_changelog_0 AS _ivm_c) AS o JOIN (SELECT * FROM dl.main.customers VERSION AS OF ${duckstream.dl_main_mv.cursor_1}) AS c ON o.customer = c.id WHERE (${duckstream.dl_main_mv.changed_0}) AND (o.amount >= 10 AND (c.region = 'north' OR c.region IS NULL)) AND c.id BETWEEN COALESCE(${duckstream.dl_main_mv.range_0_0_low}, c.id) AND COALESCE(${duckstream.dl_main_mv.range_0_0_high}, c.id) UNION ALL SELECT o.id AS id, c.region AS region, c._ivm_mult AS _ivm_mult FROM (SELECT * FROM dl.main.orders VERSION AS OF ${duckstream.dl_main_mv.end_0}) AS o JOIN (SELECT *, CAST(CASE WHEN _ivm_c._change_type = 'INSERT' THEN 1 ELSE -1 END AS BIGINT) AS _ivm_mult FROM _ivm_dl_main_mv_changelog_1 AS _ivm_c) AS c ON o.customer = c.id WHERE (${duckstream.dl_main_mv.changed_1}) AND (o.amount >= 10 AND (c.region = 'north' OR c.region IS NULL)) AND o.customer BETWEEN COALESCE(${duckstream.dl_main_mv.range_1_1_low}, o.customer) AND COALESCE(${duckstream.dl_main_mv.range_1_1_high}, o.customer)) AS d WHERE CASE WHEN d._ivm_mult < 0 THEN RAISE_ERROR('duckstream: a window of appends removes rows from dl.main.mv') ELSE d._ivm_mult > 0 END) AS _ivm_v
-- )
MERGE INTO dl.main.mv AS _ivm_t
USING (SELECT NULL AS `id`, NULL AS `region`, NULL AS `_ivm_row`, _ivm_k.`_ivm_row` AS _ivm_key0, true AS _ivm_del FROM (SELECT _ivm_row FROM (SELECT m._ivm_row, -d._ivm_mult AS _ivm_k, ROW_NUMBER() OVER (PARTITION BY d._ivm_id ORDER BY m._ivm_row NULLS LAST) AS _ivm_rn FROM dl.main.mv AS m JOIN _ivm_dl_main_mv_delta AS d ON m.id IS NOT DISTINCT FROM d.id AND m.region IS NOT DISTINCT FROM d.region WHERE d._ivm_mult < 0) AS _ivm_x WHERE _ivm_rn <= _ivm_k) AS _ivm_k
  UNION ALL
  SELECT _ivm_a.`id`, _ivm_a.`region`, _ivm_a.`_ivm_row`, NULL AS _ivm_key0, false AS _ivm_del FROM (SELECT _ivm_v.id, _ivm_v.region, (SELECT COALESCE(MAX(_ivm_row), 0) FROM dl.main.mv) + ROW_NUMBER() OVER (ORDER BY NULL NULLS LAST) AS _ivm_row FROM (SELECT d.id, d.region, EXPLODE(SEQUENCE(1, d._ivm_mult)) AS _ivm_c FROM _ivm_dl_main_mv_delta AS d WHERE d._ivm_mult > 0) AS _ivm_v) AS _ivm_a) AS _ivm_s
ON _ivm_s._ivm_del AND _ivm_t.`_ivm_row` <=> _ivm_s._ivm_key0
WHEN MATCHED THEN DELETE
WHEN NOT MATCHED AND NOT _ivm_s._ivm_del THEN INSERT (`id`, `region`, `_ivm_row`) VALUES (_ivm_s.`id`, _ivm_s.`region`, _ivm_s.`_ivm_row`);
DROP VIEW IF EXISTS _ivm_dl_main_mv_changelog_0;
DROP VIEW IF EXISTS _ivm_dl_main_mv_changelog_1;
DROP VIEW IF EXISTS _ivm_dl_main_mv_delta;

-- query_mv
SELECT id, region FROM dl.main.mv;
