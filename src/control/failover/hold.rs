//! The pause a promotion holds on the old master's shards while the
//! replica catches up.

use std::time::{Duration, Instant};

use tracing::warn;

use super::FailoverError;
use crate::control::pause::{pause, resume, PauseError};
use crate::engine::pause::{PauseGate, PausedRange};
use crate::topology::rewrite::PromotedEntry;
use crate::topology::Topology;

/// The shards a promotion holds paused while the replica catches up: every
/// range of the old master. Ranges it paused itself are resumed when it is
/// dropped, on every path; ranges an operator had paused already are used
/// as they are and left paused.
pub(super) struct PromotionPause<'a> {
    gate: &'a PauseGate,
    /// Ranges paused by the promotion: (fleet, first, last).
    ours: Vec<(String, u32, u32)>,
    /// Parts of the master's ranges that were paused already, as `main 0-99`.
    operator: Vec<String>,
    started: Instant,
}

/// How often [`PromotionPause::hold`] looks again at shards it waits for.
const PAUSE_POLL: Duration = Duration::from_millis(10);

/// Attempts at pausing what is not paused yet, when operators pause parts
/// of the same range meanwhile.
const PAUSE_ATTEMPTS: usize = 5;

impl<'a> PromotionPause<'a> {
    /// Pauses every range of `entries` not paused yet, then waits (within
    /// `drain_timeout` in all) until every shard of them is paused and
    /// nothing runs on them (a range an operator is still draining).
    pub(super) async fn hold(
        gate: &'a PauseGate,
        topology: &Topology,
        entries: &[PromotedEntry],
        drain_timeout: Duration,
    ) -> Result<PromotionPause<'a>, FailoverError> {
        let started = Instant::now();
        let deadline = started + drain_timeout;
        let mut held = PromotionPause {
            gate,
            ours: Vec::new(),
            operator: Vec::new(),
            started,
        };
        for entry in entries {
            let refused = |reason: String| FailoverError::Pause {
                fleet: entry.fleet.clone(),
                first: entry.first,
                last: entry.last,
                reason,
            };
            let before = unpaused(&gate.paused(), &entry.fleet, entry.first, entry.last);
            let mut attempts = 0;
            'pausing: loop {
                let gaps = unpaused(&gate.paused(), &entry.fleet, entry.first, entry.last);
                if gaps.is_empty() {
                    break;
                }
                attempts += 1;
                if attempts > PAUSE_ATTEMPTS {
                    return Err(refused(
                        "other pauses of these shards kept starting and ending meanwhile".into(),
                    ));
                }
                for (first, last) in gaps {
                    let left = deadline.saturating_duration_since(Instant::now());
                    match pause(gate, topology, Some(&entry.fleet), first, last, left).await {
                        Ok(_) => held.ours.push((entry.fleet.clone(), first, last)),
                        Err(PauseError::AlreadyPaused { .. }) => continue 'pausing,
                        Err(e) => return Err(refused(e.to_string())),
                    }
                }
            }
            held.operator.extend(
                paused_parts(&before, entry.first, entry.last)
                    .into_iter()
                    .map(|(first, last)| format!("{} {first}-{last}", entry.fleet)),
            );
        }
        for entry in entries {
            held.wait_drained(entry, deadline).await?;
        }
        Ok(held)
    }

    /// Waits until every shard of `entry` is paused and nothing runs on it.
    async fn wait_drained(
        &self,
        entry: &PromotedEntry,
        deadline: Instant,
    ) -> Result<(), FailoverError> {
        loop {
            let gaps = unpaused(&self.gate.paused(), &entry.fleet, entry.first, entry.last);
            let busy = (entry.first..=entry.last)
                .find(|shard| self.gate.running_on(&entry.fleet, *shard) > 0);
            let reason = match (gaps.first(), busy) {
                (None, None) => return Ok(()),
                (Some((first, last)), _) => {
                    format!("shards {first}-{last} were resumed by someone else meanwhile")
                }
                (None, Some(shard)) => format!(
                    "statements still run on shard {shard}, paused by an operator whose PAUSE is still draining"
                ),
            };
            if Instant::now() >= deadline {
                return Err(FailoverError::Pause {
                    fleet: entry.fleet.clone(),
                    first: entry.first,
                    last: entry.last,
                    reason,
                });
            }
            tokio::time::sleep(PAUSE_POLL).await;
        }
    }

    /// Ends the promotion's own pauses; returns how long they were held
    /// and the ranges left paused for their operator.
    pub(super) fn release(self) -> (Duration, Vec<String>) {
        let held = self.started.elapsed();
        let operator = self.operator.clone();
        drop(self);
        (held, operator)
    }
}

impl Drop for PromotionPause<'_> {
    fn drop(&mut self) {
        for (fleet, first, last) in self.ours.drain(..) {
            if let Err(e) = resume(self.gate, Some(&fleet), first, last) {
                warn!(%fleet, first, last, error = %e, "the promotion could not resume the shards it paused");
            }
        }
    }
}

/// The parts of `first..=last` of `fleet` that no range of `paused` covers.
fn unpaused(paused: &[PausedRange], fleet: &str, first: u32, last: u32) -> Vec<(u32, u32)> {
    let mut covered: Vec<(u32, u32)> = paused
        .iter()
        .filter(|p| p.fleet == fleet)
        .map(|p| (p.first, p.last))
        .collect();
    covered.sort_unstable();
    let mut gaps = Vec::new();
    let mut next = u64::from(first);
    for (a, b) in covered {
        if u64::from(b) < next || a > last {
            continue;
        }
        if u64::from(a) > next {
            gaps.push((next as u32, a - 1));
        }
        next = u64::from(b) + 1;
    }
    if next <= u64::from(last) {
        gaps.push((next as u32, last));
    }
    gaps
}

/// The parts of `first..=last` that are not in `gaps` (its paused parts).
fn paused_parts(gaps: &[(u32, u32)], first: u32, last: u32) -> Vec<(u32, u32)> {
    let mut parts = Vec::new();
    let mut next = u64::from(first);
    for (a, b) in gaps {
        if u64::from(*a) > next {
            parts.push((next as u32, a - 1));
        }
        next = u64::from(*b) + 1;
    }
    if next <= u64::from(last) {
        parts.push((next as u32, last));
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Engine;
    use crate::topology::tests::{load, SPEC_YAML};
    use std::time::SystemTime;

    fn paused(fleet: &str, first: u32, last: u32) -> PausedRange {
        PausedRange {
            fleet: fleet.to_owned(),
            first,
            last,
            since: SystemTime::now(),
            waiting: 0,
        }
    }

    #[test]
    fn the_unpaused_parts_of_a_range() {
        assert_eq!(unpaused(&[], "main", 0, 2047), [(0, 2047)]);
        let list = [
            paused("main", 100, 199),
            paused("mod", 0, 4095),
            paused("main", 0, 9),
            paused("main", 2000, 3000),
        ];
        assert_eq!(unpaused(&list, "main", 0, 2047), [(10, 99), (200, 1999)]);
        assert_eq!(unpaused(&list, "main", 150, 160), []);
        assert_eq!(unpaused(&list, "mod", 7, 8), []);
        assert_eq!(
            unpaused(&[paused("main", 0, u32::MAX)], "main", 5, u32::MAX),
            []
        );
        assert_eq!(
            paused_parts(&[(10, 99), (200, 1999)], 0, 2047),
            [(0, 9), (100, 199), (2000, 2047)]
        );
        assert_eq!(paused_parts(&[(0, 2047)], 0, 2047), []);
    }

    fn entry(first: u32, last: u32) -> PromotedEntry {
        PromotedEntry {
            fleet: "main".into(),
            first,
            last,
            master: "127.0.0.1:3307".into(),
            replica: "127.0.0.1:3309".into(),
        }
    }

    fn ranges(gate: &PauseGate) -> Vec<(String, u32, u32)> {
        let mut list: Vec<_> = gate
            .paused()
            .into_iter()
            .map(|p| (p.fleet, p.first, p.last))
            .collect();
        list.sort();
        list
    }

    #[tokio::test]
    async fn a_promotion_pauses_the_masters_shards_and_resumes_only_its_own() {
        let engine = Engine::new(load(SPEC_YAML));
        let topology = engine.topology.load();
        let gate = &engine.pauses;
        let drain = Duration::from_secs(5);
        pause(gate, &topology, Some("main"), 100, 199, drain)
            .await
            .unwrap();

        let held = PromotionPause::hold(gate, &topology, &[entry(0, 2047)], drain)
            .await
            .unwrap();
        let main = |first, last| ("main".to_owned(), first, last);
        assert_eq!(ranges(gate), [main(0, 99), main(100, 199), main(200, 2047)]);
        assert!((0..=2047).all(|shard| gate.is_paused("main", shard)));
        assert!(!gate.is_paused("main", 2048));
        let (_, operator) = held.release();
        assert_eq!(operator, ["main 100-199"]);
        assert_eq!(ranges(gate), [main(100, 199)], "the operator's pause stays");

        // An error after the pause (here: dropping the guard) resumes too.
        let held = PromotionPause::hold(gate, &topology, &[entry(0, 2047)], drain)
            .await
            .unwrap();
        assert_eq!(ranges(gate).len(), 3);
        drop(held);
        assert_eq!(ranges(gate), [main(100, 199)]);
    }

    #[tokio::test]
    async fn a_promotion_refuses_when_its_shards_cannot_be_paused() {
        let engine = Engine::new(load(SPEC_YAML));
        let topology = engine.topology.load();
        let error = PromotionPause::hold(
            &engine.pauses,
            &topology,
            &[entry(0, 9000)],
            Duration::from_secs(1),
        )
        .await
        .err()
        .unwrap();
        let message = error.to_string();
        assert!(
            message.starts_with("cannot pause shards 0-9000 of fleet main"),
            "{message}"
        );
        assert!(message.ends_with("nothing was changed"), "{message}");
        assert!(engine.pauses.paused().is_empty());
    }
}
