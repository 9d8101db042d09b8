//! Behaviour that needs PostgreSQL or Redis: the test starts its own throwaway instances on
//! free ports (`support::external`), never the shared ones — the PostgreSQL store, several
//! replicas on one shared state, and the harness's own services.

mod support;

mod external_services;
#[path = "replicas/main.rs"]
mod replicas;
mod replicas_postgres;
mod store_postgres;
