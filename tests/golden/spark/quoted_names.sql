-- python -m duckstream compile --dialect spark 'SELECT `Group`, COUNT(*) AS `N`, SUM(`Maß`) AS `Summe` FROM `Größe` GROUP BY `Group`'
-- features: aggregate, count, sum

-- create_cursors_table
SELECT 'duckstream: the cursors of dl.main.mv are the duckstream.cursor.<source> properties in the summary of its latest snapshot: SELECT summary FROM dl.main.mv.snapshots' AS cursors;

-- create_mv
CREATE OR REPLACE TABLE dl.main.mv AS SELECT _ivm_r.`Group` AS `Group`, _ivm_r._ivm_count AS N, CASE WHEN _ivm_r._ivm_a1_n > 0 THEN _ivm_r._ivm_a1 END AS Summe, _ivm_r._ivm_count, _ivm_r._ivm_a1, _ivm_r._ivm_a1_n FROM (SELECT `größe`.`group` AS `Group`, CAST(COUNT(*) AS BIGINT) AS _ivm_count, SUM(`größe`.`maß`) AS _ivm_a1, COUNT(`größe`.`maß`) AS _ivm_a1_n FROM dl.main.`Größe` AS `größe` WHERE FALSE GROUP BY `größe`.`group`) AS _ivm_r LIMIT 0;

-- initialize_cursors
SET spark.sql.optimizer.excludedRules = org.apache.spark.sql.catalyst.optimizer.RemoveNoopUnion;
-- the values below are the one row of:
-- SELECT e0 AS `duckstream.dl_main_mv.end_0`,
--   e0 AS `duckstream.dl_main_mv.cursor_0`
-- FROM (SELECT coalesce((SELECT snapshot_id FROM dl.main.`Größe`.refs WHERE name = 'main'), raise_error('duckstream: source dl.main.Größe has no snapshot (never written, or re-created): commit to it first, e.g. INSERT INTO <table> SELECT * FROM <table> WHERE false')) AS e0) AS pinned
SET duckstream.dl_main_mv.end_0 = <its value>;
SET duckstream.dl_main_mv.cursor_0 = <its value>;
-- commit the statement below with the snapshot properties duckstream.cursor.dl.main.Größe = ${duckstream.dl_main_mv.end_0}
INSERT OVERWRITE TABLE dl.main.mv (`Group`, `N`, `Summe`, _ivm_count, _ivm_a1, _ivm_a1_n) SELECT _ivm_r.`Group` AS `Group`, _ivm_r._ivm_count AS N, CASE WHEN _ivm_r._ivm_a1_n > 0 THEN _ivm_r._ivm_a1 END AS Summe, _ivm_r._ivm_count, _ivm_r._ivm_a1, _ivm_r._ivm_a1_n FROM (SELECT `größe`.`group` AS `Group`, CAST(COUNT(*) AS BIGINT) AS _ivm_count, SUM(`größe`.`maß`) AS _ivm_a1, COUNT(`größe`.`maß`) AS _ivm_a1_n FROM (SELECT * FROM dl.main.`Größe` VERSION AS OF ${duckstream.dl_main_mv.end_0}) AS `größe` GROUP BY `größe`.`group`) AS _ivm_r WHERE _ivm_r._ivm_count > 0;

-- maintain
SET spark.sql.optimizer.excludedRules = org.apache.spark.sql.catalyst.optimizer.RemoveNoopUnion;
-- the values below are the one row of:
-- SELECT e0 AS `duckstream.dl_main_mv.end_0`,
--   c0 AS `duckstream.dl_main_mv.cursor_0`,
--   e0 <> c0 AS `duckstream.dl_main_mv.changed_0`,
--   e0 <> c0 AS `duckstream.dl_main_mv.changed`
-- FROM (SELECT coalesce((SELECT snapshot_id FROM dl.main.`Größe`.refs WHERE name = 'main'), raise_error('duckstream: source dl.main.Größe has no snapshot (never written, or re-created): commit to it first, e.g. INSERT INTO <table> SELECT * FROM <table> WHERE false')) AS e0,
--     coalesce(CAST(mv.summary['duckstream.cursor.dl.main.Größe'] AS BIGINT), raise_error('duckstream: rebuild required: no cursor for source dl.main.Größe in the snapshots of dl.main.mv (not initialized, or the table was written outside duckstream)')) AS c0
--   FROM (SELECT max_by(s.summary, struct(s.snapshot_id = r.snapshot_id, h.made_current_at)) AS summary FROM dl.main.mv.snapshots AS s JOIN dl.main.mv.history AS h ON s.snapshot_id = h.snapshot_id CROSS JOIN dl.main.mv.refs AS r WHERE r.name = 'main' AND h.is_current_ancestor AND s.operation <> 'replace') AS mv) AS pinned
SET duckstream.dl_main_mv.end_0 = <its value>;
SET duckstream.dl_main_mv.cursor_0 = <its value>;
SET duckstream.dl_main_mv.changed_0 = <its value>;
SET duckstream.dl_main_mv.changed = <its value>;
SELECT CASE
    WHEN (SELECT count(*) FROM dl.main.`Größe`.history WHERE snapshot_id = ${duckstream.dl_main_mv.cursor_0} AND is_current_ancestor) = 0
      THEN raise_error('duckstream: rebuild required: the cursor snapshot of dl.main.Größe is no longer in its history: expired, or the table was re-created, replaced or rolled back')
    WHEN (SELECT min_by(latest_schema_id, timestamp) FROM dl.main.`Größe`.metadata_log_entries WHERE latest_snapshot_id = ${duckstream.dl_main_mv.cursor_0}) <> (SELECT max_by(latest_schema_id, timestamp) FROM dl.main.`Größe`.metadata_log_entries)
      THEN raise_error('duckstream: rebuild required: the schema of dl.main.Größe changed')
  END AS `dl.main.Größe`;
-- stop here (run only the clean-up) unless ${duckstream.dl_main_mv.changed} is true;
CALL dl.system.create_changelog_view(table => 'main.`Größe`', options => map('start-snapshot-id', '${duckstream.dl_main_mv.cursor_0}', 'end-snapshot-id', '${duckstream.dl_main_mv.end_0}'), changelog_view => '_ivm_dl_main_mv_changelog_0');
CREATE OR REPLACE TEMPORARY VIEW _ivm_dl_main_mv_delta AS SELECT _ivm_g0, CAST(SUM(_ivm_mult) AS BIGINT) AS _ivm_count, SUM(_ivm_x1 * _ivm_mult) AS _ivm_a1, SUM(COALESCE(CASE WHEN NOT _ivm_x1 IS NULL THEN _ivm_mult END, 0)) AS _ivm_a1_n FROM (SELECT `größe`.`group` AS _ivm_g0, `größe`.`maß` AS _ivm_x1, `größe`._ivm_mult AS _ivm_mult FROM (SELECT *, CAST(CASE WHEN _ivm_c._change_type = 'INSERT' THEN 1 ELSE -1 END AS BIGINT) AS _ivm_mult FROM _ivm_dl_main_mv_changelog_0 AS _ivm_c) AS `größe` WHERE (${duckstream.dl_main_mv.changed_0})) AS _ivm_net GROUP BY _ivm_g0;
CREATE OR REPLACE TEMPORARY VIEW _ivm_dl_main_mv_new AS SELECT d._ivm_g0 AS `Group`, COALESCE(o._ivm_count, 0) + d._ivm_count AS _ivm_count, COALESCE(o._ivm_a1, 0) + COALESCE(d._ivm_a1, 0) AS _ivm_a1, COALESCE(o._ivm_a1_n, 0) + COALESCE(d._ivm_a1_n, 0) AS _ivm_a1_n FROM _ivm_dl_main_mv_delta AS d LEFT JOIN dl.main.mv AS o ON o.`Group` IS NOT DISTINCT FROM d._ivm_g0;
-- commit the statement below with the snapshot properties duckstream.cursor.dl.main.Größe = ${duckstream.dl_main_mv.end_0}
MERGE INTO dl.main.mv AS _ivm_t
USING (SELECT _ivm_r.`Group` AS `Group`, _ivm_r._ivm_count AS N, CASE WHEN _ivm_r._ivm_a1_n > 0 THEN _ivm_r._ivm_a1 END AS Summe, _ivm_r._ivm_count, _ivm_r._ivm_a1, _ivm_r._ivm_a1_n, COALESCE((_ivm_r._ivm_count > 0), FALSE) AS _ivm_keep FROM (SELECT `Group`, _ivm_count, _ivm_a1, _ivm_a1_n FROM _ivm_dl_main_mv_new) AS _ivm_r) AS _ivm_s
ON _ivm_t.`Group` <=> _ivm_s.`Group`
WHEN MATCHED AND NOT _ivm_s._ivm_keep THEN DELETE
WHEN MATCHED THEN UPDATE SET `Group` = _ivm_s.`Group`, `N` = _ivm_s.`N`, `Summe` = _ivm_s.`Summe`, `_ivm_count` = _ivm_s.`_ivm_count`, `_ivm_a1` = _ivm_s.`_ivm_a1`, `_ivm_a1_n` = _ivm_s.`_ivm_a1_n`
WHEN NOT MATCHED AND _ivm_s._ivm_keep THEN INSERT (`Group`, `N`, `Summe`, `_ivm_count`, `_ivm_a1`, `_ivm_a1_n`) VALUES (_ivm_s.`Group`, _ivm_s.`N`, _ivm_s.`Summe`, _ivm_s.`_ivm_count`, _ivm_s.`_ivm_a1`, _ivm_s.`_ivm_a1_n`);
DROP VIEW IF EXISTS _ivm_dl_main_mv_changelog_0;
DROP VIEW IF EXISTS _ivm_dl_main_mv_delta;
DROP VIEW IF EXISTS _ivm_dl_main_mv_new;

-- query_mv
SELECT `Group`, `N`, `Summe` FROM dl.main.mv;
