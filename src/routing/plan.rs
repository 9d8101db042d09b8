//! `AttemptPlan`: the fixed order of (channel, key) attempts for one request
//! (R4.1, R4.2, R4.3, R4.8, R5).
//!
//! The channel order is computed once, at request start, from the route(s) and
//! an availability snapshot; later changes to breakers or channel state never
//! reshuffle it (R4.8). Keys and same-target retries are walked as decisions
//! arrive. When availability leaves no candidate at all, the plan falls back to
//! every candidate and reports [`AttemptPlan::all_unavailable`]: the attempts then
//! fail fast (an open breaker answers 503 at once, R6.1) and the client gets that
//! answer rather than a bare "no channel".

use std::sync::Arc;

use smallvec::SmallVec;

use super::latency::{p2c_order, Score};
use super::policy::Decision;
use super::table::{ChannelId, Route};
use super::weighted::{draw, weighted_order, Order};
use crate::config::model::TierWalk;

/// `PlanInput::score`: a candidate's moving score (R19.1).
pub type Scorer<'a> = Option<&'a dyn Fn(ChannelId, &str) -> Option<Score>>;

/// What the plan is built from.
pub struct PlanInput<'a> {
    /// (group name, route): one entry for a normal client, the `auto_groups`
    /// list (in order) for an `auto` client.
    pub groups: &'a [(&'a str, &'a Route)],
    pub tier_walk: TierWalk,
    pub retry_times: u32,
    pub cross_group_retry: bool,
    /// Number of upstream keys of a channel (0 is treated as 1).
    pub key_count: &'a dyn Fn(ChannelId) -> usize,
    /// The key index this request starts at on a channel (taken modulo the count).
    pub key_cursor: &'a dyn Fn(ChannelId) -> usize,
    /// Evaluated once per candidate — (channel, upstream model) — at plan time (breaker,
    /// disabled, cooldown, model not found).
    pub available: &'a dyn Fn(ChannelId, &str) -> bool,
    /// A channel to try first when it is a candidate of the groups used (the sticky
    /// binding, R8.3); it then appears once, at the front.
    pub preferred: Option<ChannelId>,
    /// `routing.balance: capacity` (R15.3): each candidate's weight is scaled by this
    /// fraction in `[0, 1]` (its keys' remaining budget); `None` = weights as configured.
    pub weight_scale: Option<&'a dyn Fn(ChannelId) -> f64>,
    /// R16.1: the candidates that serve the request as it is (no translation). Within a
    /// tier they are planned before the others, so a translated target is a fallback for a
    /// native one of the same priority, never its competitor. `None` = no preference.
    pub native: Option<&'a dyn Fn(ChannelId) -> bool>,
    /// `routing.balance: latency` (R19.1): each candidate's moving score (`None`: not
    /// scored yet); the tier is then ordered by power of two choices
    /// (`routing::latency`) instead of a weighted draw. `None` = weighted.
    pub score: Scorer<'a>,
}

/// One planned channel visit (for `/admin/explain` and tests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedTarget {
    /// Index into `PlanInput::groups`.
    pub group: usize,
    pub channel: ChannelId,
    pub upstream_model: Arc<str>,
}

/// One upstream attempt to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub group: usize,
    pub channel: ChannelId,
    pub key_index: usize,
    pub upstream_model: Arc<str>,
    /// 0 for a fresh target, n for the n-th same-target retry.
    pub same_target_retry: u32,
}

/// One channel's key rotation: how many keys, the next to use, how many were used.
#[derive(Debug, Clone, Copy)]
struct Keys {
    count: usize,
    next: usize,
    used: usize,
}

/// The attempt order of one request.
#[derive(Debug)]
pub struct AttemptPlan {
    slots: Slots,
    next_slot: usize,
    max_steps: u32,
    steps: u32,
    current: Option<Step>,
    /// Key rotation per distinct planned channel (a few; a map cost a SipHash per request).
    keys: SmallVec<[(ChannelId, Keys); 2]>,
    /// Targets past the step cap, in order: a skipped target (`skip_current`) gives its
    /// attempt back, and the next of these takes it.
    spare: Vec<PlannedTarget>,
    all_unavailable: bool,
    finished: bool,
}

/// A plan's containers hold a few entries: inline (no allocation per request) up to these
/// sizes, on the heap past them.
type Tier = SmallVec<[(ChannelId, Arc<str>, u64); 4]>;
type Tiers = SmallVec<[Tier; 2]>;
type Groups = SmallVec<[(usize, Tiers); 1]>;
type Slots = SmallVec<[PlannedTarget; 2]>;

fn tiers_of(route: &Route, keep: &dyn Fn(ChannelId, &str) -> bool) -> Tiers {
    route
        .tiers
        .iter()
        .map(|t| {
            t.candidates
                .iter()
                .filter(|c| keep(c.channel, &c.upstream_model))
                .map(|c| (c.channel, c.upstream_model.clone(), c.weight))
                .collect::<Tier>()
        })
        .filter(|t| !t.is_empty())
        .collect()
}

/// Each tier split in two, the native candidates first (R16.1, see `PlanInput::native`).
fn native_first(tiers: Tiers, native: Option<&dyn Fn(ChannelId) -> bool>) -> Tiers {
    let Some(native) = native else {
        return tiers;
    };
    // Nothing to split when every candidate is native (the common case): no new tiers.
    if tiers.iter().flatten().all(|c| native(c.0)) {
        return tiers;
    }
    let mut out = Tiers::with_capacity(tiers.len());
    for tier in tiers {
        let (own, other): (Tier, Tier) = tier.into_iter().partition(|c| native(c.0));
        out.extend([own, other].into_iter().filter(|t| !t.is_empty()));
    }
    out
}

/// Weights scaled by `scale` (at least 1, so a spent candidate stays last, not gone).
fn scaled(mut tiers: Tiers, scale: Option<&dyn Fn(ChannelId) -> f64>) -> Tiers {
    if let Some(scale_of) = scale {
        for c in tiers.iter_mut().flatten() {
            let scale = scale_of(c.0);
            let scale = if scale.is_finite() {
                scale.clamp(0.0, 1.0)
            } else {
                1.0
            };
            c.2 = ((c.2 as f64 * scale).round() as u64).max(1);
        }
    }
    tiers
}

/// A tier's order: weighted, or by power of two choices over the scores (R19.1).
fn order(tier: &[(ChannelId, Arc<str>, u64)], score: Scorer, rng: &mut fastrand::Rng) -> Order {
    let weights: SmallVec<[u64; 8]> = tier.iter().map(|c| c.2).collect();
    match score {
        None => weighted_order(&weights, rng),
        Some(f) => {
            let scores: Vec<Option<Score>> = tier.iter().map(|c| f(c.0, &c.1)).collect();
            Order::from_vec(p2c_order(&weights, &scores, rng))
        }
    }
}

fn pick(
    tier: &[(ChannelId, Arc<str>, u64)],
    group: usize,
    score: Scorer,
    rng: &mut fastrand::Rng,
) -> PlannedTarget {
    let i = match score {
        None => {
            let weights: SmallVec<[u64; 8]> = tier.iter().map(|c| c.2).collect();
            draw(&weights, rng).unwrap_or(0)
        }
        Some(_) => order(tier, score, rng).first().copied().unwrap_or(0),
    };
    PlannedTarget {
        group,
        channel: tier[i].0,
        upstream_model: tier[i].1.clone(),
    }
}

/// Move (or insert) the first visit of `preferred` to the front of `slots` (R8.3).
fn prefer(slots: &mut Slots, groups: &[(usize, Tiers)], preferred: ChannelId) {
    if let Some(pos) = slots.iter().position(|s| s.channel == preferred) {
        let target = slots.remove(pos);
        slots.insert(0, target);
        return;
    }
    let found = groups.iter().find_map(|(g, tiers)| {
        tiers
            .iter()
            .flatten()
            .find(|c| c.0 == preferred)
            .map(|c| (*g, c.1.clone()))
    });
    if let Some((group, upstream_model)) = found {
        slots.insert(
            0,
            PlannedTarget {
                group,
                channel: preferred,
                upstream_model,
            },
        );
    }
}

/// The groups' tiers of available candidates; when none is available, every candidate
/// (and `true`: the plan then fails fast on open breakers rather than answering "no channel").
fn usable_groups(input: &PlanInput) -> (Groups, bool) {
    let tiers = |keep: &dyn Fn(ChannelId, &str) -> bool| -> Groups {
        input
            .groups
            .iter()
            .enumerate()
            .map(|(i, (_, r))| {
                let tiers = native_first(tiers_of(r, keep), input.native);
                (i, scaled(tiers, input.weight_scale))
            })
            .filter(|(_, t)| !t.is_empty())
            .collect()
    };
    let avail = tiers(input.available);
    if !avail.is_empty() {
        return (avail, false);
    }
    let all = tiers(&|_, _| true);
    let all_unavailable = !all.is_empty();
    (all, all_unavailable)
}

/// `tier_walk: exhaust` (R4.2): every candidate of a tier, in weighted order, before the
/// next tier; each target once.
fn exhaust(groups: &[(usize, Tiers)], score: Scorer, rng: &mut fastrand::Rng) -> Slots {
    let mut slots = Slots::new();
    for (g, tiers) in groups {
        for tier in tiers {
            for i in order(tier, score, rng) {
                let (ch, model, _) = &tier[i];
                // A target is planned once; plans are short, so a scan beats hashing every
                // (channel, model) pair.
                let seen = slots
                    .iter()
                    .any(|s| s.channel == *ch && s.upstream_model == *model);
                if !seen {
                    slots.push(PlannedTarget {
                        group: *g,
                        channel: *ch,
                        upstream_model: model.clone(),
                    });
                }
            }
        }
    }
    slots
}

/// `tier_walk: one_per_tier` (new-api): attempt n draws from tier n; past the lowest tier
/// of the last group it stays there, up to `cap` attempts.
fn one_per_tier(
    groups: &[(usize, Tiers)],
    cap: usize,
    score: Scorer,
    rng: &mut fastrand::Rng,
) -> Slots {
    let mut slots = Slots::new();
    let n = groups.len();
    for (k, (g, tiers)) in groups.iter().enumerate() {
        for tier in tiers {
            if slots.len() < cap {
                slots.push(pick(tier, *g, score, rng));
            }
        }
        if k + 1 == n {
            if let Some(lowest) = tiers.last() {
                while slots.len() < cap {
                    slots.push(pick(lowest, *g, score, rng));
                }
            }
        }
    }
    slots
}

impl AttemptPlan {
    pub fn new(input: &PlanInput, rng: &mut fastrand::Rng) -> Self {
        let max_steps = input.retry_times.saturating_add(1);
        let (mut groups, all_unavailable) = usable_groups(input);
        if !input.cross_group_retry {
            groups.truncate(1);
        }
        let cap = max_steps as usize;
        let mut slots = match input.tier_walk {
            TierWalk::Exhaust => exhaust(&groups, input.score, rng),
            TierWalk::OnePerTier => one_per_tier(&groups, cap, input.score, rng),
        };
        if let Some(p) = input.preferred {
            prefer(&mut slots, &groups, p);
        }
        let spare: Vec<PlannedTarget> = if slots.len() > cap {
            slots.drain(cap..).collect()
        } else {
            Vec::new()
        };
        let mut keys = SmallVec::<[(ChannelId, Keys); 2]>::new();
        for ch in slots.iter().chain(&spare).map(|s| s.channel) {
            if !keys.iter().any(|(c, _)| *c == ch) {
                let count = (input.key_count)(ch).max(1);
                keys.push((
                    ch,
                    Keys {
                        count,
                        next: (input.key_cursor)(ch) % count,
                        used: 0,
                    },
                ));
            }
        }
        AttemptPlan {
            slots,
            next_slot: 0,
            max_steps,
            steps: 0,
            current: None,
            keys,
            spare,
            all_unavailable,
            finished: false,
        }
    }

    /// The current target was skipped without reaching the upstream (R16.1: the request
    /// cannot be expressed in its format): the attempt does not count against
    /// `retry_times`, and the first target past the cap, if any, joins the plan. Its other
    /// keys are not tried (they would refuse alike); the next decision should fail over.
    pub fn skip_current(&mut self) {
        self.steps = self.steps.saturating_sub(1);
        if let Some(c) = self.current.as_ref().map(|c| c.channel) {
            if let Some((_, k)) = self.keys.iter_mut().find(|(ch, _)| *ch == c) {
                k.used = k.count;
            }
        }
        if !self.spare.is_empty() {
            let target = self.spare.remove(0);
            self.slots.push(target);
        }
    }

    /// R19.3: a target not started yet was sent the request beside the current one (a
    /// hedge): it leaves the plan, so it is not sent the request again, and the first target
    /// past the cap, if any, takes its place. False when it was not upcoming.
    pub fn take_upcoming(&mut self, channel: ChannelId, upstream_model: &str) -> bool {
        let Some(pos) = self
            .upcoming()
            .iter()
            .position(|t| t.channel == channel && &*t.upstream_model == upstream_model)
        else {
            return false;
        };
        self.slots.remove(self.next_slot + pos);
        if !self.spare.is_empty() {
            let target = self.spare.remove(0);
            self.slots.push(target);
        }
        true
    }

    fn take_key(&mut self, ch: ChannelId) -> usize {
        match self.keys.iter_mut().find(|(c, _)| *c == ch) {
            Some((_, Keys { count, next, used })) => {
                let i = *next;
                *next = (*next + 1) % *count;
                *used = (*used + 1).min(*count);
                i
            }
            None => 0,
        }
    }

    fn untried_key(&self, ch: ChannelId) -> bool {
        self.keys.iter().any(|(c, k)| *c == ch && k.used < k.count)
    }

    fn start_slot(&mut self) -> Option<Step> {
        let target = self.slots.get(self.next_slot)?.clone();
        self.next_slot += 1;
        Some(Step {
            group: target.group,
            key_index: self.take_key(target.channel),
            channel: target.channel,
            upstream_model: target.upstream_model,
            same_target_retry: 0,
        })
    }

    fn next_key(&mut self, cur: &Step) -> Step {
        Step {
            key_index: self.take_key(cur.channel),
            same_target_retry: 0,
            ..cur.clone()
        }
    }

    /// The next attempt, given the decision on the previous one (`None` first).
    /// Returns `None` when the plan is used up, the step cap (`retry_times + 1`)
    /// is reached, or the last decision was `Done`/`Return`.
    pub fn next(&mut self, last: Option<&Decision>) -> Option<Step> {
        if self.finished || self.steps >= self.max_steps {
            self.finished = true;
            return None;
        }
        let step = match (self.current.clone(), last) {
            (None, _) => self.start_slot(),
            (Some(_), Some(d)) if d.ends() => None,
            (Some(cur), Some(Decision::RetrySame { .. })) => Some(Step {
                same_target_retry: cur.same_target_retry + 1,
                ..cur
            }),
            (Some(cur), Some(Decision::FailOver { key_fault })) => self.move_on(&cur, *key_fault),
            (Some(cur), _) => self.move_on(&cur, false),
        };
        match step {
            Some(s) => {
                self.steps += 1;
                self.current = Some(s.clone());
                Some(s)
            }
            None => {
                self.finished = true;
                None
            }
        }
    }

    fn move_on(&mut self, cur: &Step, key_fault: bool) -> Option<Step> {
        if key_fault && self.untried_key(cur.channel) {
            return Some(self.next_key(cur));
        }
        if self.next_slot < self.slots.len() {
            return self.start_slot();
        }
        if self.untried_key(cur.channel) {
            return Some(self.next_key(cur));
        }
        None
    }

    /// Does another (channel, key) target remain?
    pub fn alternatives_left(&self) -> bool {
        if self.finished {
            return false;
        }
        match &self.current {
            None => !self.slots.is_empty(),
            Some(c) => self.next_slot < self.slots.len() || self.untried_key(c.channel),
        }
    }

    /// Attempts handed out so far (same-target retries included).
    pub fn attempts_made(&self) -> u32 {
        self.steps
    }

    /// Attempts still allowed by `retry_times`.
    pub fn attempts_left(&self) -> u32 {
        self.max_steps.saturating_sub(self.steps)
    }

    /// Same-target retries already made on the current target.
    pub fn same_target_retries(&self) -> u32 {
        self.current.as_ref().map_or(0, |c| c.same_target_retry)
    }

    /// True when availability left nothing and the plan uses every candidate.
    pub fn all_unavailable(&self) -> bool {
        self.all_unavailable
    }

    /// True when there is nothing to try at all.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Channel visits not started yet, in order (does not consume; `/admin/explain`).
    pub fn upcoming(&self) -> &[PlannedTarget] {
        self.slots.get(self.next_slot..).unwrap_or(&[])
    }

    /// Every planned channel visit, in order.
    pub fn targets(&self) -> &[PlannedTarget] {
        &self.slots
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
