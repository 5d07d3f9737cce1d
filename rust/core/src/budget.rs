//! Budget arithmetic (SPEC §3, ADR 0001): reserve, body, usable, tool
//! results and history, with the three overflow checks in contract order.

use crate::error::{CoreError, CoreResult};

/// The inputs of [`allocate_tokens`], named as in the contract.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetInput {
    pub context_window: i64,
    pub max_output_tokens: i64,
    pub default_output_reserve: i64,
    pub prefix_tokens: i64,
    pub reserve_tokens: i64,
    pub margin_ratio: f64,
    pub tool_results_ratio: f64,
    pub working_state_tokens: i64,
    pub history_floor: i64,
    pub prefix_ceiling: i64,
}

/// `(reserve, body, usable, tool_results, history)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allocation {
    pub reserve: i64,
    pub body: i64,
    pub usable: i64,
    pub tool_results: i64,
    pub history: i64,
}

fn overflowed() -> CoreError {
    CoreError::policy("budget", "token arithmetic overflows a 64-bit integer")
}

/// `floor(tokens * ratio)` in IEEE-754 double, as Python's
/// `math.floor(int * float)` computes it.
fn floor_product(tokens: i64, ratio: f64, key: &str) -> CoreResult<i64> {
    let product = (tokens as f64 * ratio).floor();
    if !product.is_finite() {
        return Err(CoreError::policy(key, "ratio must be a finite number"));
    }
    // i64 spans [-2^63, 2^63).
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if !(-LIMIT..LIMIT).contains(&product) {
        return Err(overflowed());
    }
    Ok(product as i64)
}

/// Split a context window into the turn body's classes (ADR 0001 order).
pub fn allocate_tokens(b: &BudgetInput) -> CoreResult<Allocation> {
    if b.prefix_tokens > b.prefix_ceiling {
        return Err(CoreError::overflow(
            "prefix",
            b.prefix_tokens,
            b.prefix_ceiling,
            format!(
                "the prefix of {} tokens exceeds the prefix ceiling of {} tokens; \
                 shorten the instructions, tools or skills of the prefix, or raise BudgetPolicy \
                 prefix.ceiling_tokens (BudgetPolicy.from_dict({{'prefix': {{'ceiling_tokens': N}}}}))",
                b.prefix_tokens, b.prefix_ceiling
            ),
        ));
    }
    let reserve = b
        .reserve_tokens
        .min(b.default_output_reserve)
        .min(b.max_output_tokens);
    let taken = reserve
        .checked_add(b.prefix_tokens)
        .ok_or_else(overflowed)?;
    let body = b.context_window.checked_sub(taken).ok_or_else(overflowed)?;
    if body <= 0 {
        return Err(CoreError::overflow(
            "context_window",
            taken,
            b.context_window,
            format!(
                "the output reserve of {reserve} tokens and the prefix of {} tokens take \
                 {taken} tokens, leaving no body in the window of {} tokens; lower BudgetPolicy \
                 output.reserve_tokens (BudgetPolicy.from_dict({{'output': {{'reserve_tokens': N}}}})), \
                 shorten the prefix or use a larger window",
                b.prefix_tokens, b.context_window
            ),
        ));
    }
    let usable = body
        .checked_sub(floor_product(body, b.margin_ratio, "margin_ratio")?)
        .ok_or_else(overflowed)?;
    let tool_results = floor_product(usable, b.tool_results_ratio, "tool_results_ratio")?;
    let history = usable
        .checked_sub(b.working_state_tokens)
        .and_then(|h| h.checked_sub(tool_results))
        .ok_or_else(overflowed)?;
    if history < b.history_floor {
        return Err(CoreError::overflow(
            "history",
            history,
            b.history_floor,
            format!(
                "the history budget of {history} tokens is below its floor of {} tokens: \
                 the window of {} tokens leaves {history} for history after the output \
                 reserve of {reserve}, the prefix of {}, the safety margin of {}, \
                 the working state of {} and the tool results of {tool_results}; \
                 lower BudgetPolicy history.floor_tokens \
                 (BudgetPolicy.from_dict({{'history': {{'floor_tokens': N}}}})) or use a larger window",
                b.history_floor,
                b.context_window,
                b.prefix_tokens,
                body - usable,
                b.working_state_tokens
            ),
        ));
    }
    Ok(Allocation {
        reserve,
        body,
        usable,
        tool_results,
        history,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input() -> BudgetInput {
        BudgetInput {
            context_window: 200_000,
            max_output_tokens: 64_000,
            default_output_reserve: 16_000,
            prefix_tokens: 10_000,
            reserve_tokens: 8192,
            margin_ratio: 0.05,
            tool_results_ratio: 0.25,
            working_state_tokens: 1000,
            history_floor: 8000,
            prefix_ceiling: 15_000,
        }
    }

    #[test]
    fn default_split() {
        let a = allocate_tokens(&input()).unwrap();
        // body = 200000 - 8192 - 10000 = 181808; margin floor(9090.4) = 9090
        assert_eq!(a.reserve, 8192);
        assert_eq!(a.body, 181_808);
        assert_eq!(a.usable, 172_718);
        assert_eq!(a.tool_results, 43_179); // floor(43179.5)
        assert_eq!(a.history, 172_718 - 1000 - 43_179);
    }

    #[test]
    fn reserve_is_the_smallest_of_three() {
        let mut b = input();
        b.max_output_tokens = 4000;
        assert_eq!(allocate_tokens(&b).unwrap().reserve, 4000);
        b.default_output_reserve = 3000;
        assert_eq!(allocate_tokens(&b).unwrap().reserve, 3000);
    }

    /// `(class, tokens, cap, detail)` of an overflow.
    fn overflow_of(r: CoreResult<Allocation>) -> (String, i64, i64, String) {
        match r {
            Err(CoreError::ContextOverflow {
                budget_class,
                tokens,
                cap,
                detail,
            }) => (budget_class, tokens, cap, detail),
            other => panic!("expected an overflow, got {other:?}"),
        }
    }

    #[test]
    fn checks_in_contract_order() {
        let mut b = input();
        b.prefix_tokens = 16_000;
        b.context_window = 10;
        let (class, tokens, cap, detail) = overflow_of(allocate_tokens(&b));
        assert_eq!((class.as_str(), tokens, cap), ("prefix", 16_000, 15_000));
        assert!(detail
            .starts_with("the prefix of 16000 tokens exceeds the prefix ceiling of 15000 tokens;"));
        assert!(detail.contains("prefix.ceiling_tokens"));
        b.prefix_tokens = 10_000;
        let (class, tokens, cap, detail) = overflow_of(allocate_tokens(&b));
        assert_eq!(
            (class.as_str(), tokens, cap),
            ("context_window", 18_192, 10)
        );
        assert!(detail.starts_with(
            "the output reserve of 8192 tokens and the prefix of 10000 tokens take 18192 tokens, \
             leaving no body in the window of 10 tokens;"
        ));
        b.context_window = 18_192;
        let (class, tokens, cap, _) = overflow_of(allocate_tokens(&b));
        assert_eq!(
            (class.as_str(), tokens, cap),
            ("context_window", 18_192, 18_192)
        );
        b.context_window = 30_000;
        // body 11808, margin 590 -> usable 11218, tools 2804, history 7414
        let (class, tokens, cap, detail) = overflow_of(allocate_tokens(&b));
        assert_eq!((class.as_str(), tokens, cap), ("history", 7414, 8000));
        assert!(detail.starts_with(
            "the history budget of 7414 tokens is below its floor of 8000 tokens: \
             the window of 30000 tokens leaves 7414 for history after the output reserve of 8192, \
             the prefix of 10000, the safety margin of 590, the working state of 1000 and the \
             tool results of 2804; lower BudgetPolicy history.floor_tokens"
        ));
        b.history_floor = 7414;
        assert_eq!(allocate_tokens(&b).unwrap().history, 7414);
    }

    #[test]
    fn non_finite_ratio_is_a_policy_error() {
        let mut b = input();
        b.margin_ratio = f64::NAN;
        assert!(matches!(allocate_tokens(&b), Err(CoreError::Policy { .. })));
    }
}
