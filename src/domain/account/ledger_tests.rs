//! The account's rules against a reference ledger: random postings (charges, payments,
//! reversals, adjustments) and settings changes (discounts, thresholds, the webstore's
//! default), and after every step the balance is the sum of the transactions, each
//! transaction's `balance` is the running sum, the numbers count up from 1, and the halt by
//! balance is exactly "at or below the threshold in force".
//!
//! Tests only. Must not touch: storage, the clock, HTTP.

use proptest::prelude::*;

use super::transaction::{Posting, TransactionKind, TransactionOf};
use super::*;
use crate::domain::day::Day;

#[derive(Debug, Clone)]
enum Step {
    Post(i64, usize),
    Threshold(Option<i64>),
    Default(Option<i64>),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (-50_000i64..50_000, 0usize..5).prop_map(|(amount, kind)| Step::Post(amount, kind)),
        1 => proptest::option::of(-10_000i64..10_000).prop_map(Step::Threshold),
        1 => proptest::option::of(-10_000i64..10_000).prop_map(Step::Default),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn the_balance_is_the_sum_of_the_transactions_and_the_halt_follows_the_threshold(
        steps in proptest::collection::vec(step(), 1..60),
    ) {
        let mut account = Account::opened(CustomerId(7), 0);
        let mut ledger: Vec<Transaction> = Vec::new();
        let mut default = None;
        for (at, step) in steps.into_iter().enumerate() {
            let now = at as i64 + 1;
            match step {
                Step::Post(amount, kind) => {
                    let posting = Posting {
                        amount: Amount(amount),
                        kind: TransactionKind::ALL[kind],
                        description: String::new(),
                        date: Day(20_000),
                        of: TransactionOf::Nothing,
                    };
                    let (next, transaction) =
                        account.post(posting, 1_000 + at as u64, now, default).unwrap();
                    ledger.push(transaction);
                    account = next;
                }
                Step::Threshold(threshold) => {
                    account = account.with_settings(
                        account.discount, threshold.map(Amount), now, default);
                }
                Step::Default(threshold) => {
                    default = threshold.map(Amount);
                    account = account.with_settings(
                        account.discount, account.threshold, now, default);
                }
            }
            let sum: i64 = ledger.iter().map(|t| t.amount.0).sum();
            prop_assert_eq!(account.balance, Amount(sum));
            prop_assert_eq!(account.transactions, ledger.len() as u64);
            let mut running = 0;
            for (n, transaction) in ledger.iter().enumerate() {
                running += transaction.amount.0;
                prop_assert_eq!(transaction.balance, Amount(running));
                prop_assert_eq!(transaction.number, n as u64 + 1);
            }
            let in_force = account.threshold.or(default);
            prop_assert_eq!(
                account.halted_by_balance,
                in_force.is_some_and(|t| account.balance <= t)
            );
        }
    }
}
