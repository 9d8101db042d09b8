//! Several replicas sharing live state through Redis (R17), every test on its own
//! private `redis-server`: three real processes end to end (`e2e`), shared-state runtimes in
//! process (`state`), and the rate-limit store on Redis (`limits`). One module of the `services` test binary.

mod e2e;
mod fleet;
mod limits;
mod state;
