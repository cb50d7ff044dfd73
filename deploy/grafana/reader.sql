-- The read-only role Grafana's PostgreSQL data source connects as (docs/monitoring.md): it
-- reads the tables the dashboards' SQL panels read, nothing else (no credentials, no users,
-- no run JSON), and its transactions are read-only. Idempotent: the compose service
-- grafana-reader runs it after each migrate. The password comes from the environment
-- (\getenv), never from argv.
\getenv password GRAFANA_DB_PASSWORD
SELECT format('CREATE ROLE grafana_reader LOGIN PASSWORD %L', :'password')
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'grafana_reader') \gexec
ALTER ROLE grafana_reader PASSWORD :'password';
ALTER ROLE grafana_reader SET default_transaction_read_only = on;
-- Table-wide SELECT would include an endpoint's stored credential (encrypted, but a secret
-- all the same) and a vantage point's token digests: those two tables are granted column by
-- column. REVOKE first: a table-wide grant of an earlier version would outlive the column
-- grants. A column added later is not readable until it is added here.
REVOKE ALL ON sites_site, sites_endpoint, sites_vantagepoint, watch_regression,
    watch_serieslatest FROM grafana_reader;
GRANT SELECT ON sites_site, watch_regression, watch_serieslatest TO grafana_reader;
GRANT SELECT (id, name, protocol, base_url, role, enabled, created_at, updated_at, site_id,
    credential_kind, door_auth, external_id, source) ON sites_endpoint TO grafana_reader;
GRANT SELECT (id, name, location, description, created_at, max_parallel_runs, enrolled_at,
    revoked_at) ON sites_vantagepoint TO grafana_reader;
