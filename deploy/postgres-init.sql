-- The least-privilege logins of deploy/compose.yaml. The postgres image runs
-- this once, as POSTGRES_USER, when it initialises an empty data volume
-- (/docker-entrypoint-initdb.d); for an existing volume run the same
-- statements by hand (docs/operations.md, "Database roles").
--
-- The group roles are the ones migration 006 grants to (it makes them itself
-- when they are missing, and leaves existing ones alone); each service logs in
-- as a member of exactly one. The passwords come from deploy/.env (psql's
-- \getenv; an unset one stops the initialisation).
\set ON_ERROR_STOP on
\getenv gateway_password GATEWAY_DB_PASSWORD
\getenv agency_password AGENCY_DB_PASSWORD
\getenv resource_password RESOURCE_DB_PASSWORD

CREATE ROLE scoped_gateway NOLOGIN;
CREATE ROLE scoped_resource NOLOGIN;
CREATE ROLE scoped_agency NOLOGIN;

CREATE ROLE gateway LOGIN PASSWORD :'gateway_password' IN ROLE scoped_gateway;
CREATE ROLE agency_service LOGIN PASSWORD :'agency_password' IN ROLE scoped_agency;
CREATE ROLE resource_service LOGIN PASSWORD :'resource_password' IN ROLE scoped_resource;
