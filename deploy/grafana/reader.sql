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
GRANT SELECT ON sites_site, sites_endpoint, sites_vantagepoint, watch_regression,
    watch_serieslatest TO grafana_reader;
