//! Money as the service counts it: [`Amount`], a signed number of minor units (hundredths of
//! the webstore's currency, as the catalogue's prices), never floating point; [`Discount`], a
//! customer's discount as a fraction with four decimals; and what a delivery costs
//! ([`delivery_price`]: the box and its extras less the discount, rounded half to even to
//! the cent, plus the delivery service's fee), as the system the contract follows priced a
//! package.
//!
//! Pure. Must not touch: accounts and their transactions (they hold amounts), I/O.

use std::fmt;

/// A signed amount in minor units (hundredths).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Amount(pub i64);

impl Amount {
    /// Nothing.
    pub const ZERO: Amount = Amount(0);

    /// The amount of `cents` minor units.
    pub fn cents(cents: i64) -> Amount {
        Amount(cents)
    }

    /// The sum, or `None` past what an `i64` holds.
    pub fn checked_add(self, other: Amount) -> Option<Amount> {
        self.0.checked_add(other.0).map(Amount)
    }

    /// Its negation (`None` for the one amount without one).
    pub fn checked_neg(self) -> Option<Amount> {
        self.0.checked_neg().map(Amount)
    }

    /// An amount as a request spells it, read exactly from its JSON text (`raw`: a number or
    /// a string): digits with at most two decimals, a `-` in front where negative, at most
    /// [`MAX_AMOUNT`] either way; no exponent, no `+`, no spaces. `None` for anything else.
    pub fn from_json_text(raw: &str) -> Option<Amount> {
        let raw = raw.trim();
        let text = match raw.strip_prefix('"') {
            Some(quoted) => quoted.strip_suffix('"')?,
            None => raw,
        };
        let (negative, digits) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
        let all_digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
        if whole.is_empty()
            || whole.len() > 12
            || !all_digits(whole)
            || fraction.len() > 2
            || (digits.contains('.') && fraction.is_empty())
            || !all_digits(fraction)
        {
            return None;
        }
        let cents =
            whole.parse::<i64>().ok()? * 100 + format!("{fraction:0<2}").parse::<i64>().ok()?;
        if cents > MAX_AMOUNT.0 {
            return None;
        }
        Some(Amount(if negative { -cents } else { cents }))
    }
}

/// The largest amount one request may move: 100,000,000.00 (so that no sum of a ledger's
/// amounts comes near what an `i64` holds).
pub const MAX_AMOUNT: Amount = Amount(10_000_000_000);

impl fmt::Display for Amount {
    /// Two decimals, with a sign where negative: `12.50`, `-0.05`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let cents = self.0.unsigned_abs();
        write!(f, "{sign}{}.{:02}", cents / 100, cents % 100)
    }
}

/// A discount: a fraction from 0 to 1 in ten-thousandths (four decimals, as the system the
/// contract follows kept it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Discount(u16);

impl Discount {
    /// No discount.
    pub const NONE: Discount = Discount(0);
    /// Ten-thousandths in the whole.
    pub const WHOLE: u16 = 10_000;

    /// The discount of `ten_thousandths` (at most [`Discount::WHOLE`]).
    pub fn of(ten_thousandths: u16) -> Option<Discount> {
        (ten_thousandths <= Discount::WHOLE).then_some(Discount(ten_thousandths))
    }

    /// Its ten-thousandths.
    pub fn ten_thousandths(self) -> u16 {
        self.0
    }

    /// A discount as a request spells it, read exactly from its JSON text (a number or a
    /// string): from 0 to 1 with at most four decimals (`0.1`, `"0.125"`, `1`).
    pub fn from_json_text(raw: &str) -> Option<Discount> {
        let raw = raw.trim();
        let text = match raw.strip_prefix('"') {
            Some(quoted) => quoted.strip_suffix('"')?,
            None => raw,
        };
        let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
        let all_digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
        if whole.is_empty()
            || whole.len() > 1
            || !all_digits(whole)
            || fraction.len() > 4
            || (text.contains('.') && fraction.is_empty())
            || !all_digits(fraction)
        {
            return None;
        }
        let value = whole.parse::<u16>().ok()? * Discount::WHOLE
            + format!("{fraction:0<4}").parse::<u16>().ok()?;
        Discount::of(value)
    }
}

impl fmt::Display for Discount {
    /// As a decimal fraction without trailing zeros: `0`, `0.1`, `0.125`, `1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let whole = self.0 / Discount::WHOLE;
        let fraction = self.0 % Discount::WHOLE;
        if fraction == 0 {
            return write!(f, "{whole}");
        }
        let digits = format!("{fraction:04}");
        write!(f, "{whole}.{}", digits.trim_end_matches('0'))
    }
}

/// What a delivery costs: `box_cents` and each extra's price times its quantity, less
/// `discount`, rounded half to even to the cent, plus the delivery service's `fee_cents`.
pub fn delivery_price(
    box_cents: u64,
    extras: impl IntoIterator<Item = (u64, u32)>,
    discount: Discount,
    fee_cents: u64,
) -> Amount {
    let goods: u128 = extras
        .into_iter()
        .map(|(price, quantity)| u128::from(price) * u128::from(quantity))
        .sum::<u128>()
        + u128::from(box_cents);
    let whole = u128::from(Discount::WHOLE);
    let scaled = goods * (whole - u128::from(discount.0));
    let (quotient, remainder) = (scaled / whole, scaled % whole);
    let half = whole / 2;
    let discounted = match remainder.cmp(&half) {
        std::cmp::Ordering::Less => quotient,
        std::cmp::Ordering::Greater => quotient + 1,
        std::cmp::Ordering::Equal => quotient + (quotient & 1),
    };
    let total = discounted + u128::from(fee_cents);
    Amount(i64::try_from(total).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn amounts_show_two_decimals_and_a_sign() {
        assert_eq!(Amount(1250).to_string(), "12.50");
        assert_eq!(Amount(-5).to_string(), "-0.05");
        assert_eq!(Amount(0).to_string(), "0.00");
        assert_eq!(Amount(-100_000).to_string(), "-1000.00");
        assert_eq!(Amount(i64::MIN).to_string(), "-92233720368547758.08");
    }

    #[test]
    fn amounts_are_read_exactly_from_their_text() {
        for (text, cents) in [
            ("12.50", 1250),
            ("\"12.5\"", 1250),
            ("12", 1200),
            ("0.05", 5),
            ("-3.10", -310),
            ("\"-0.01\"", -1),
            ("100000000", 10_000_000_000),
        ] {
            assert_eq!(Amount::from_json_text(text), Some(Amount(cents)), "{text}");
        }
        for text in [
            "12.505",
            "1e2",
            "+1",
            "1.",
            ".5",
            "",
            "\"\"",
            "\" 1\"",
            "100000000.01",
            "--1",
            "1,5",
            "true",
            "null",
            "[1]",
            "\"12.5",
            "0x10",
            "1.2.3",
            "999999999999999999999",
        ] {
            assert_eq!(Amount::from_json_text(text), None, "{text}");
        }
    }

    #[test]
    fn discounts_are_read_exactly_from_their_text() {
        for (text, value) in [
            ("0", 0),
            ("0.1", 1000),
            ("\"0.125\"", 1250),
            ("1", 10_000),
            ("1.0000", 10_000),
        ] {
            assert_eq!(
                Discount::from_json_text(text),
                Discount::of(value),
                "{text}"
            );
        }
        for text in ["1.0001", "-0.1", "0.12345", "2", "10", "1e-1", "\"\"", "0."] {
            assert_eq!(Discount::from_json_text(text), None, "{text}");
        }
    }

    #[test]
    fn discounts_show_their_decimals() {
        assert_eq!(Discount::NONE.to_string(), "0");
        assert_eq!(Discount::of(1000).unwrap().to_string(), "0.1");
        assert_eq!(Discount::of(1250).unwrap().to_string(), "0.125");
        assert_eq!(Discount::of(10_000).unwrap().to_string(), "1");
        assert_eq!(Discount::of(10_001), None);
    }

    #[test]
    fn a_price_rounds_half_to_even_after_the_discount_and_adds_the_fee() {
        // £30.00 box, two £7.50 juices, no discount, £5.00 fee.
        assert_eq!(
            delivery_price(3000, [(750, 2)], Discount::NONE, 500),
            Amount(5000)
        );
        // 10% off £0.25: 22.5 cents, to even: 22.
        assert_eq!(delivery_price(25, [], Discount(1000), 0), Amount(22));
        // 10% off £0.35: 31.5 cents, to even: 32.
        assert_eq!(delivery_price(35, [], Discount(1000), 0), Amount(32));
        // A whole discount leaves the fee.
        assert_eq!(
            delivery_price(3000, [(750, 1)], Discount(10_000), 500),
            Amount(500)
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

        /// Against a model in exact rational arithmetic: within half a cent of the exact
        /// discounted price, never above the undiscounted one, and no discount is exact.
        #[test]
        fn prices_are_the_exact_price_rounded(
            box_cents in 0u64..1_000_000,
            extras in prop::collection::vec((0u64..100_000, 0u32..1000), 0..20),
            discount in 0u16..=10_000,
            fee in 0u64..10_000,
        ) {
            let goods: i128 = i128::from(box_cents)
                + extras.iter().map(|(p, q)| i128::from(*p) * i128::from(*q)).sum::<i128>();
            let price = delivery_price(box_cents, extras.clone(), Discount(discount), fee);
            let exact_times_whole = goods * i128::from(10_000 - discount);
            let got = i128::from(price.0 - fee as i64) * 10_000;
            prop_assert!((got - exact_times_whole).abs() <= 5_000);
            prop_assert!(i128::from(price.0) <= goods + i128::from(fee));
            if discount == 0 {
                prop_assert_eq!(i128::from(price.0), goods + i128::from(fee));
            }
        }
    }
}
