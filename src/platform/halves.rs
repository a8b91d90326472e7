//! The search by halves: sending a batch to an ad platform so that one bad event never sinks
//! the others.
//!
//! An ad platform refuses a whole request when one of its events is bad. When its answer names
//! the events (Meta's `data[i]`), those are refused with its message and the rest are tried again at once.
//! When it names none, the batch is searched by halves: one half is tried; if it is taken the
//! refused event is in the other, which is halved in turn without being tried whole; if it is
//! refused, the other half waits and is tried once the refused event is found. A batch of 1000
//! with one bad event costs at most 11 requests more than a good one (one per halving, ten
//! of them, and one for the halves that waited). Once three refused events have been found so,
//! a refused half's other half is tried at once rather than waiting ([`BOTH_HALVES_AFTER`]):
//! when many or all events are bad (a refusal that is the destination's, not an event's), that
//! costs about two requests an event instead of ten.
//!
//! Sending stops at the first answer that is no refusal (a throttle, a transient error, a
//! token that no longer works): every event not yet taken shares it.

use std::future::Future;

use serde_json::Value;

use super::face::Answer;

/// The most of a platform's answer that is read: Meta's error, with the `data[i]` it names,
/// is longer than what a delivery keeps.
pub const PLATFORM_ANSWER_BYTES: usize = 64 * 1024;

/// Refused events found alone (each refused in a request of its own, with no event named)
/// after which a refused half's other half is tried at once instead of waiting: a batch with up
/// to three bad events costs what it did (one in 1000 at most 11 more requests; 4 to 10 cost a
/// few more), while one in which every event is refused costs about two requests an event
/// (2,022 for 1000) instead of ten (8,987).
const BOTH_HALVES_AFTER: usize = 3;

/// What became of one event of a batch, with the answer `A` that decided it.
#[derive(Clone, Debug)]
pub enum Fate<A> {
    Delivered(A),
    /// Refused for good, with the platform's message as the answer.
    Refused(A),
    /// To be tried again, no sooner than `after_ms` when set.
    Retry(A, Option<u64>),
    /// The access token no longer works; the answer says so.
    TokenRejected(A),
}

/// What the search needs of an answer `A` to a request: what it means, and the answer with
/// the platform's message as what is kept of it.
pub trait Reply: Clone {
    fn meaning(&self) -> Answer;
    #[must_use]
    fn with_message(&self, message: &str) -> Self;
}

/// Sends `data` (each entry one event) by `post`, which sends one request of the entries it is
/// given; answers the fate of each entry, in order.
///
/// # Panics
/// Never: every entry is sent until sending stops, and then shares how it stopped.
pub async fn send_batch<A, F, Fut>(data: &[Value], mut post: F) -> Vec<Fate<A>>
where
    A: Reply,
    F: FnMut(Vec<Value>) -> Fut,
    Fut: Future<Output = A>,
{
    let pick = |set: &[usize]| set.iter().map(|&i| data[i].clone()).collect::<Vec<_>>();
    let mut fates: Vec<Option<Fate<A>>> = vec![None; data.len()];
    // Sets still to send; a set with a refusal is known to hold a refused event.
    let mut work: Vec<(Vec<usize>, Option<A>)> = vec![((0..data.len()).collect(), None)];
    // Halves that wait while the refused event of their other half is searched for.
    let mut waiting: Vec<usize> = Vec::new();
    let mut stopped: Option<Fate<A>> = None;
    let mut found = 0;
    while stopped.is_none() {
        let Some((set, refusal)) = work.pop() else {
            if waiting.is_empty() {
                break;
            }
            work.push((std::mem::take(&mut waiting), None));
            continue;
        };
        if set.is_empty() {
            continue;
        }
        let (tried, rest, refusal) = match refusal {
            Some(refusal) if set.len() == 1 => {
                fates[set[0]] = Some(Fate::Refused(refusal));
                continue;
            }
            Some(refusal) => {
                let (left, right) = set.split_at(set.len() / 2);
                (left.to_vec(), right.to_vec(), Some(refusal))
            }
            None => (set, Vec::new(), None),
        };
        let answered = post(pick(&tried)).await;
        match answered.meaning() {
            Answer::Delivered => {
                for &i in &tried {
                    fates[i] = Some(Fate::Delivered(answered.clone()));
                }
                // The refusal was of the other half, then.
                work.push((rest, refusal));
            }
            Answer::Refused { named, message } => {
                let named: Vec<usize> = named
                    .into_iter()
                    .filter_map(|at| tried.get(at).copied())
                    .collect();
                let refused = answered.with_message(&message);
                if named.is_empty() {
                    if tried.len() == 1 {
                        fates[tried[0]] = Some(Fate::Refused(refused));
                        found += 1;
                    } else {
                        work.push((tried, Some(refused)));
                    }
                    if found >= BOTH_HALVES_AFTER {
                        work.push((rest, None));
                    } else {
                        waiting.extend(rest);
                    }
                } else {
                    for &i in &named {
                        fates[i] = Some(Fate::Refused(refused.clone()));
                    }
                    let others = tried.into_iter().filter(|i| !named.contains(i)).collect();
                    work.push((rest, None));
                    work.push((others, None));
                }
            }
            Answer::Retry { after_ms } => stopped = Some(Fate::Retry(answered, after_ms)),
            Answer::TokenRejected { message } => {
                stopped = Some(Fate::TokenRejected(answered.with_message(&message)));
            }
        }
    }
    fates
        .into_iter()
        .map(|f| {
            f.or_else(|| stopped.clone())
                .expect("every event is tried until sending stops")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use serde_json::json;

    use super::*;
    use crate::platform::meta::meta_answer;

    /// An answer as the search sees it: what is kept of it, and what Meta's code makes of it.
    #[derive(Clone, Debug)]
    struct Said {
        answer: String,
        meaning: Answer,
    }

    impl Reply for Said {
        fn meaning(&self) -> Answer {
            self.meaning.clone()
        }

        fn with_message(&self, message: &str) -> Self {
            Said {
                answer: message.to_owned(),
                meaning: self.meaning.clone(),
            }
        }
    }

    fn answer(status: u16, body: &str) -> Said {
        Said {
            answer: body.to_owned(),
            meaning: meta_answer(status, body),
        }
    }

    /// Meta's stand-in: refuses a request holding a bad event (naming it when `names`).
    fn meta(bad: &[u64], names: bool, request: &[Value]) -> Said {
        let at: Vec<usize> = request
            .iter()
            .enumerate()
            .filter(|(_, e)| bad.contains(&e["n"].as_u64().unwrap()))
            .map(|(i, _)| i)
            .collect();
        if at.is_empty() {
            return answer(200, r#"{"events_received":1}"#);
        }
        let msg = if names {
            at.iter()
                .map(|i| format!("data[{i}] is bad"))
                .collect::<Vec<_>>()
                .join("; ")
        } else {
            "Invalid parameter".to_owned()
        };
        answer(
            400,
            &json!({"error": {"message": msg, "code": 100}}).to_string(),
        )
    }

    fn run(n: u64, bad: &[u64], names: bool) -> (Vec<Fate<Said>>, usize) {
        let data: Vec<Value> = (0..n).map(|n| json!({ "n": n })).collect();
        let requests = RefCell::new(0);
        let fates = futures_executor_block_on(send_batch(&data, |req| {
            *requests.borrow_mut() += 1;
            let a = meta(bad, names, &req);
            async move { a }
        }));
        (fates, requests.into_inner())
    }

    fn futures_executor_block_on<T>(f: impl Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    fn refused(fates: &[Fate<Said>]) -> Vec<usize> {
        fates
            .iter()
            .enumerate()
            .filter(|(_, f)| matches!(f, Fate::Refused(_)))
            .map(|(i, _)| i)
            .collect()
    }

    #[test]
    fn one_unnamed_bad_event_in_1000_costs_at_most_11_more_requests() {
        for bad in [0, 1, 499, 500, 777, 998, 999] {
            let (fates, requests) = run(1000, &[bad], false);
            assert_eq!(refused(&fates), [usize::try_from(bad).unwrap()], "{bad}");
            assert!(requests <= 12, "bad {bad}: {requests} requests");
            let delivered = fates
                .iter()
                .filter(|f| matches!(f, Fate::Delivered(_)))
                .count();
            assert_eq!(delivered, 999);
        }
        let (fates, _) = run(1000, &[3, 640, 641], false);
        assert_eq!(refused(&fates), [3, 640, 641]);
    }

    #[test]
    fn a_batch_whose_every_event_is_refused_costs_about_two_requests_an_event() {
        let all: Vec<u64> = (0..1000).collect();
        let (fates, requests) = run(1000, &all, false);
        assert_eq!(refused(&fates).len(), 1000);
        assert!(requests <= 2100, "{requests} requests");
        // A few bad events cost what they did before (34 requests for these three).
        let (fates, requests) = run(1000, &[3, 640, 641], false);
        assert_eq!(refused(&fates), [3, 640, 641]);
        assert!(requests <= 34, "{requests} requests");
        let spread: Vec<u64> = (0..50).map(|i| i * 20 + 7).collect();
        let (fates, requests) = run(1000, &spread, false);
        assert_eq!(refused(&fates).len(), 50);
        assert_eq!(
            fates
                .iter()
                .filter(|f| matches!(f, Fate::Delivered(_)))
                .count(),
            950
        );
        assert!(requests <= 450, "{requests} requests");
    }

    #[test]
    fn named_events_are_refused_and_the_rest_tried_again_at_once() {
        let (fates, requests) = run(1000, &[10, 900], true);
        assert_eq!(refused(&fates), [10, 900]);
        assert_eq!(requests, 2);
        let Fate::Refused(a) = &fates[10] else {
            panic!()
        };
        assert!(a.answer.contains("data[10] is bad"), "{}", a.answer);
    }

    #[test]
    fn a_throttle_stops_sending_and_every_event_not_taken_waits() {
        let data: Vec<Value> = (0..4).map(|n| json!({ "n": n })).collect();
        let fates = futures_executor_block_on(send_batch(&data, |_| async {
            answer(
                400,
                r#"{"error":{"message":"User request limit reached","code":17,"is_transient":true}}"#,
            )
        }));
        assert!(
            fates
                .iter()
                .all(|f| matches!(f, Fate::Retry(_, Some(60_000))))
        );
    }
}
