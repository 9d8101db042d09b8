//! Which routes a request may use (R1.1, R3.1, R5.1; "only declared endpoints reach
//! upstream"): the R1.1 endpoint families are routed by the body's `model` (exact names, then
//! model patterns); every other path reaches only channels that declare it in `paths` (or a
//! `tasks.paths` prefix), and is answered 404 otherwise — whatever model the body names. A
//! channel of another wire format serves chat and messages only translated (R16.1).

use std::sync::Arc;

use crate::config::model::Client;
use crate::error::GatewayError;
use crate::routing::family::{serves, PathFamily};
use crate::routing::pair;
use crate::routing::table::{Route, Tier};
use crate::state::Snapshot;

/// The routes a request may use, in group order: (the group's position in
/// [`client_groups`], its route). Inline for one or two groups (no allocation per request).
pub type Routes = smallvec::SmallVec<[(usize, Arc<Route>); 2]>;

/// The groups a client's requests may use, in order (R5.1): the `auto_groups` for
/// `group: auto`, else its one group; borrowed from the table or the client (no allocation
/// per request).
pub fn client_groups<'a>(snap: &'a Snapshot, client: &'a Client) -> &'a [Arc<str>] {
    if &*client.group == "auto" {
        &snap.table.config.auto_groups
    } else {
        std::slice::from_ref(&client.group)
    }
}

/// What the lookup needs to know about the request.
pub struct Wanted<'a> {
    pub family: PathFamily,
    pub model: Option<&'a str>,
    /// The normalised path.
    pub path: &'a str,
    /// The body is a JSON object (a missing `model` is then the client's mistake).
    pub json: bool,
    /// The path lies under a `tasks.paths` prefix: declared by the operator.
    pub task_path: bool,
}

/// (group, route) for each group that can serve the request, in group order.
pub fn routes(
    snap: &Snapshot,
    groups: &[Arc<str>],
    w: &Wanted<'_>,
) -> Result<Routes, GatewayError> {
    let by_model = w.family.routed_by_model() || w.task_path;
    let mut out = Routes::new();
    for (i, g) in groups.iter().enumerate() {
        let declared = snap.table.paths.get(pair::key(&(&**g, w.path)));
        let model_route = || {
            w.model
                .and_then(|m| snap.table.model_route(g, m))
                .map(|(r, _)| r)
        };
        let found = if by_model {
            model_route().or_else(|| declared.cloned())
        } else {
            declared.map(|d| match model_route() {
                Some(m) => narrow(d, &m),
                None => d.clone(),
            })
        };
        if let Some(r) = found.and_then(|r| servable(snap, w, r)) {
            out.push((i, r));
        }
    }
    if !out.is_empty() {
        return Ok(out);
    }
    Err(match (w.model, by_model) {
        (Some(m), true) => GatewayError::model_not_found(m),
        (None, true) if w.json => GatewayError::missing_model(),
        (None, true) if w.family.json_only() => GatewayError::not_json(w.path),
        _ => GatewayError::path_not_found(w.path),
    })
}

/// The route without the channels that cannot serve this request's wire format (R16.1:
/// `translate: false`, token counting, Gemini); `None` when none is left. The route itself
/// (no allocation) when every channel can.
fn servable(snap: &Snapshot, w: &Wanted<'_>, r: Arc<Route>) -> Option<Arc<Route>> {
    let serves = |ch: usize| {
        snap.table
            .channels
            .get(ch)
            .is_some_and(|c| serves(w.family, w.path, c))
    };
    if r.tiers
        .iter()
        .flat_map(|t| t.candidates.iter())
        .all(|c| serves(c.channel))
    {
        return Some(r);
    }
    let tiers: Vec<Tier> = r
        .tiers
        .iter()
        .map(|t| Tier {
            priority: t.priority,
            candidates: t
                .candidates
                .iter()
                .filter(|c| serves(c.channel))
                .cloned()
                .collect(),
        })
        .filter(|t| !t.candidates.is_empty())
        .collect();
    (!tiers.is_empty()).then(|| Arc::new(Route::of(tiers)))
}

/// A declared path whose request names a model: the declaring channels that also serve the
/// model (with its upstream name); all declaring channels when none does.
fn narrow(declared: &Arc<Route>, by_model: &Route) -> Arc<Route> {
    let upstream = |ch: usize| {
        by_model
            .tiers
            .iter()
            .flat_map(|t| t.candidates.iter())
            .find(|c| c.channel == ch)
            .map(|c| c.upstream_model.clone())
    };
    let tiers: Vec<Tier> = declared
        .tiers
        .iter()
        .map(|t| Tier {
            priority: t.priority,
            candidates: t
                .candidates
                .iter()
                .filter_map(|candidate| {
                    let mut candidate = candidate.clone();
                    candidate.upstream_model = upstream(candidate.channel)?;
                    Some(candidate)
                })
                .collect(),
        })
        .filter(|t| !t.candidates.is_empty())
        .collect();
    if tiers.is_empty() {
        declared.clone()
    } else {
        Arc::new(Route::of(tiers))
    }
}
