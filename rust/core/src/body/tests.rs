//! The fit over plain numbers (the reference is the full specification;
//! `tests/assembly/test_fit_body.py` compares the two on generated bodies).

use super::*;
use crate::cut::ToolRole;
use crate::error::CoreResult;

/// A host over plain numbers that records its calls.
struct Mock {
    lines_raws: Vec<i64>,
    pointer_raws: Vec<Option<i64>>,
    calls: Vec<String>,
}

impl BodyHost for Mock {
    type Error = CoreError;
    fn lines_raw(&mut self, block: usize, lines: usize) -> CoreResult<i64> {
        self.calls.push(format!("lines:{block}:{lines}"));
        Ok(self.lines_raws[lines])
    }
    fn pointer_raw(&mut self, index: usize) -> CoreResult<Option<i64>> {
        self.calls.push(format!("pointer:{index}"));
        Ok(self.pointer_raws[index])
    }
    fn lacking_pointers(&mut self, results: &[usize]) -> CoreResult<Vec<usize>> {
        Ok(results
            .iter()
            .copied()
            .filter(|&i| self.pointer_raws[i].is_none())
            .collect())
    }
}

fn block(class: &'static str, kind: Kind, raws: Vec<i64>) -> Block<'static> {
    Block {
        class,
        kind,
        len: raws.len(),
        raws,
        ids: Vec::new(),
        max_items: None,
        max_tokens: None,
    }
}

fn limits(usable: i64) -> BodyLimits {
    BodyLimits {
        usable,
        history_cap: usable,
        tool_cap: usable,
        summary_floor: None,
        summary_compactable: true,
    }
}

/// History: (user, call, result, assistant) x 2, 10 each; blocks: working
/// state 5, knowledge 10 + 20, recall of 3 lines (30), metadata 5, turn 5.
fn session() -> (Vec<HistoryItem<'static>>, Vec<Block<'static>>, Mock) {
    let roles = [
        ToolRole::Other,
        ToolRole::Call("a"),
        ToolRole::Result("a"),
        ToolRole::Other,
        ToolRole::Other,
        ToolRole::Call("b"),
        ToolRole::Result("b"),
        ToolRole::Other,
    ];
    let history = roles
        .iter()
        .enumerate()
        .map(|(i, &role)| HistoryItem {
            raw: 10,
            seq: Some(i as i64 + 1),
            role,
            hash: match role {
                ToolRole::Call(id) | ToolRole::Result(id) => crate::cut::fnv1a(id.as_bytes()),
                ToolRole::Other => 0,
            },
        })
        .collect();
    let mut knowledge = block("knowledge", Kind::Passages, vec![10, 20]);
    knowledge.ids = vec!["k0", "k1"];
    let mut recall = block("recall", Kind::Lines, vec![30]);
    recall.len = 3;
    let blocks = vec![
        block("history", Kind::History, vec![]),
        block("working_state", Kind::WorkingState, vec![5]),
        knowledge,
        recall,
        block("runtime_metadata", Kind::Fixed, vec![5]),
        block("current_user", Kind::Turn, vec![5]),
    ];
    let mock = Mock {
        lines_raws: vec![0, 10, 20, 30],
        pointer_raws: vec![None, None, Some(4), None, None, None, Some(4), None],
        calls: Vec::new(),
    };
    (history, blocks, mock)
}

fn fit(l: &BodyLimits, blocks: &[Block], history: &[HistoryItem<'_>], host: &mut Mock) -> BodyFit {
    fit_body(l, blocks, history, (1, 1), host).unwrap()
}

#[test]
fn everything_fits() {
    let (history, blocks, mut host) = session();
    let f = fit(&limits(1000), &blocks, &history, &mut host);
    assert_eq!(f.reason, Reason::Fits);
    assert_eq!(f.cut, 0);
    assert!(f.steps.is_empty());
    assert_eq!(f.body_raw, 15 + 30 + 30 + 80);
    assert_eq!(f.history_budget, 1000 - 75);
    assert!(host.calls.is_empty());
    assert_eq!(f.body.len(), 8 + 1 + 2 + 1 + 1 + 1);
    assert_eq!(f.body[0], Part::History(0));
    assert_eq!(f.body[10], Part::Item { block: 2, item: 1 });
    assert_eq!(f.body[11], Part::Item { block: 3, item: 2 });
}

#[test]
fn the_ladder_in_order() {
    // fixed 15, knowledge 30, recall 30, history 80: 155 in all.
    let (history, blocks, mut host) = session();
    let f = fit(&limits(110), &blocks, &history, &mut host);
    // both passages go (135, 125), then two recall lines (115, 105).
    assert_eq!(host.calls, vec!["lines:3:2", "lines:3:1"]);
    assert_eq!(f.reason, Reason::Fits);
    assert_eq!(f.body_raw, 105);

    let (history, blocks, mut host) = session();
    let f = fit(&limits(60), &blocks, &history, &mut host);
    assert_eq!(
        f.steps,
        vec![
            "knowledge_dropped:k1",
            "knowledge_dropped:k0",
            "recall_lines_dropped:3",
            "tool_results_truncated:2",
            "history_cut:3",
        ]
    );
    assert_eq!(
        host.calls,
        vec!["lines:3:2", "lines:3:1", "pointer:2", "pointer:6"]
    );
    assert_eq!(f.reason, Reason::HistoryRequiresCompaction);
    assert!(f.compactable);
    // history 80 - 12 = 68 over a budget of 60 - 15 = 45: 44 retained from 3 on
    assert_eq!(f.history_budget, 45);
    assert_eq!(f.cut, 3);
    assert_eq!(f.body_raw, 15 + 68 - 24);
    assert_eq!(f.body[0], Part::History(3));
    assert_eq!(f.body[3], Part::Pointer(6));
}

#[test]
fn caps_and_reasons() {
    let (history, mut blocks, mut host) = session();
    blocks[2].max_items = Some(1);
    blocks[3].max_tokens = Some(15);
    blocks[1].max_tokens = Some(4);
    let f = fit(&limits(1000), &blocks, &history, &mut host);
    assert_eq!(f.reason, Reason::WorkingStateExceedsCap);
    assert_eq!(
        f.steps,
        vec!["knowledge_over_cap:k1", "recall_lines_over_cap:2"]
    );
    assert_eq!(f.body[9], Part::Item { block: 2, item: 0 });
    assert_eq!(f.body[10], Part::Item { block: 3, item: 0 });
}

#[test]
fn a_lacking_pointer_comes_back_as_missing() {
    let (history, blocks, mut host) = session();
    host.pointer_raws[6] = None;
    host.pointer_raws[2] = None;
    let f = fit(&limits(60), &blocks, &history, &mut host);
    assert_eq!(f.missing, vec![2, 6]);
    assert!(f.body.is_empty() && f.steps.is_empty());
}

#[test]
fn the_pairing_error_comes_at_the_cut() {
    let (mut history, blocks, mut host) = session();
    history[1].role = ToolRole::Other;
    let err = fit_body(&limits(1000), &blocks, &history, (1, 1), &mut host).unwrap_err();
    assert_eq!(
        err,
        CoreError::orphan("a", 2, crate::cut::REASON_RESULT_WITHOUT_CALL)
    );
}

#[test]
fn corrections_scale_every_comparison() {
    let (history, blocks, mut host) = session();
    // 155 raw * 2 = 310 > 200
    let f = fit_body(&limits(200), &blocks, &history, (2, 1), &mut host).unwrap();
    assert_eq!(f.steps[0], "knowledge_dropped:k1");
}
