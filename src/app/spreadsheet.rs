//! Cells of the day's CSV download made safe to open in a spreadsheet. A producer opens the
//! download in Excel, LibreOffice or Google Sheets, which read a cell that begins with `=`,
//! `+`, `-` or `@` (or a tab or carriage return before one) as a formula: a customer named
//! `=HYPERLINK("https://evil.example","Click")` would become a link, or worse (OWASP, "CSV
//! injection"). Such a cell is written with a `'` before it, which spreadsheets show as text
//! and do not display. Only the download does this; the API's CSV is for programs and keeps
//! every value exactly as its JSON does.
//!
//! Must not touch: the CSV's columns or quoting (the `csv` crate quotes).

use std::borrow::Cow;

/// The characters a spreadsheet reads as the start of a formula when a cell begins with one.
const FORMULA_STARTS: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// `cell`, prefixed with `'` if a spreadsheet would read it as a formula.
pub fn spreadsheet_safe(cell: &str) -> Cow<'_, str> {
    if cell.starts_with(FORMULA_STARTS) {
        Cow::Owned(format!("'{cell}"))
    } else {
        Cow::Borrowed(cell)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn formulas_are_neutralised_and_text_is_kept() {
        for (cell, safe) in [
            (
                "=HYPERLINK(\"https://evil.example\",\"x\")",
                "'=HYPERLINK(\"https://evil.example\",\"x\")",
            ),
            ("+44 20 7946 0000", "'+44 20 7946 0000"),
            ("-2+3", "'-2+3"),
            ("@SUM(A1)", "'@SUM(A1)"),
            ("\t=1", "'\t=1"),
            ("\r=1", "'\r=1"),
            ("Ann O'Neil", "Ann O'Neil"),
            ("1 My Street", "1 My Street"),
            ("", ""),
            ("a=b", "a=b"),
        ] {
            assert_eq!(spreadsheet_safe(cell), safe, "{cell:?}");
        }
    }

    proptest! {
        #[test]
        fn a_safe_cell_never_begins_a_formula_and_keeps_the_value_after_its_quote(cell in ".*") {
            let safe = spreadsheet_safe(&cell);
            prop_assert!(!safe.starts_with(FORMULA_STARTS));
            let kept = safe.strip_prefix('\'').filter(|_| cell.starts_with(FORMULA_STARTS));
            prop_assert_eq!(kept.unwrap_or(&safe), cell.as_str());
        }
    }
}
