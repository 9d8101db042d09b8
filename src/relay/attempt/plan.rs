//! The plan step (R4.1–R4.3, R4.8, R5, R8.3): the request's fixed attempt order over its
//! routes, from one availability snapshot, walking only the enabled keys of each channel
//! (R7.1) that no rate limit holds back (R15.3, `keys`), with the sticky binding's channel
//! first when it is usable.

use crate::affinity::Sticky;
use crate::config::model::Balance;
use crate::relay::answer::finish::Finish;
use crate::relay::attempt::keys::{plan_keys, PlanKeys};
use crate::relay::context::Context;
use crate::relay::gateway::Gateway;
use crate::routing::latency::Score;
use crate::routing::plan::{AttemptPlan, PlanInput};
use crate::routing::table::Route;
use crate::state::outcome as health;

/// A request's plan and what maps it back to the request.
pub struct Planned {
    pub plan: AttemptPlan,
    /// The plan walks enabled keys only; this maps its key positions to real key indexes.
    pub keys: PlanKeys,
    /// The request's affinity state (R8), when it has a sticky key.
    pub sticky: Option<Sticky>,
}

/// Plan the attempts of `cx`; the sticky key's kind and hit go on the request's record.
pub fn plan(gw: &Gateway, cx: &Context, fin: &mut Finish, rng: &mut fastrand::Rng) -> Planned {
    let snap = &cx.snap;
    let cfg = &snap.table.config;
    let routes: smallvec::SmallVec<[(&str, &Route); 2]> = cx
        .routes
        .iter()
        .map(|(g, r)| (cx.group(*g), r.as_ref()))
        .collect();
    let candidates = routes
        .iter()
        .flat_map(|(_, r)| r.tiers.iter())
        .flat_map(|t| t.candidates.iter().map(|c| c.channel));
    // R15.3: keys cooling after a rate-limit answer or out of budget are set aside; a
    // channel with none left is unavailable (other channels first).
    let keys = plan_keys(
        gw,
        snap,
        candidates,
        crate::relay::attempt::estimate::estimate_tokens(cx),
    );
    let key_count = |id: usize| keys.count(id, snap.table.channels[id].keys.len());
    let key_start = |id: usize| snap.states[id].next_key_start(key_count(id));
    let now = crate::clock::instant();
    // Availability is per (channel, upstream model): a virtual model's targets are separate.
    let available = |id: usize, upstream: &str| {
        !keys.held.contains(&id)
            && health::available(&snap.table.channels[id], &snap.states[id], upstream, now)
    };
    let capacity = |id: usize| crate::relay::attempt::keys::remaining_fraction(gw, snap, id, &keys);
    let by_capacity = cfg.routing.balance == Balance::Capacity;
    // R19.1: the moving score of each (channel, upstream model), this replica's own.
    let stream = cx.wants_stream();
    let score = |id: usize, upstream: &str| snap.states[id].scores.get(upstream, stream);
    let by_latency = cfg.routing.balance == Balance::Latency;
    // R16.1: within a tier, the channels that speak the client's format go first.
    let native = |id: usize| {
        crate::relay::attempt::translated::of(cx.family, snap.table.channels[id].kind).is_none()
    };
    let mut sticky = cx
        .sticky
        .map(|k| Sticky::lookup(&gw.bindings, snap, &routes, k));
    let plan = AttemptPlan::new(
        &PlanInput {
            groups: &routes,
            tier_walk: cfg.routing.tier_walk,
            retry_times: cfg.routing.retry_times,
            cross_group_retry: cx.client.cross_group_retry,
            key_count: &key_count,
            key_cursor: &key_start,
            available: &available,
            preferred: sticky.as_ref().and_then(|s| s.preferred),
            weight_scale: by_capacity.then_some(&capacity as &dyn Fn(usize) -> f64),
            native: Some(&native),
            score: by_latency.then_some(&score as &dyn Fn(usize, &str) -> Option<Score>),
        },
        rng,
    );
    if let Some(s) = sticky.as_mut() {
        s.planned(plan.targets().first().map(|t| t.channel));
        fin.sticky(s.key.kind.as_str(), s.hit);
    }
    Planned { plan, keys, sticky }
}
