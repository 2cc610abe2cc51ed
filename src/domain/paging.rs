//! Pagination of customer lists: reading `page` and `per_page` (contract section 5) and
//! working out which neighbouring pages exist for the `Link` header.
//!
//! Must not touch: the listings themselves (`crate::registry::listing`), HTTP headers.

use super::fields::{parse_digits, FieldErrors};

const POSITIVE: &str = "must be a positive integer";

/// Customers per page unless the client says otherwise.
pub const DEFAULT_PER_PAGE: u64 = 100;
/// Most customers per page.
pub const MAX_PER_PAGE: u64 = 1000;

/// A validated page request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    /// From 1.
    pub number: u64,
    /// From 1 to [`MAX_PER_PAGE`].
    pub per_page: u64,
}

impl Page {
    /// Reads the query parameters; both are reported when both are bad.
    pub fn parse(page: Option<&str>, per_page: Option<&str>) -> Result<Page, FieldErrors> {
        let mut errors = FieldErrors::new();
        let mut read = |name: &str, raw: Option<&str>, default: u64, max: u64| match raw {
            None => default,
            Some(text) => match parse_digits(text) {
                None | Some(0) => {
                    errors.add(name, POSITIVE);
                    default
                }
                Some(n) if n > max => {
                    errors.add(name, format!("must be less than or equal to {max}"));
                    default
                }
                Some(n) => n,
            },
        };
        let number = read("page", page, 1, u64::MAX / MAX_PER_PAGE);
        let per_page = read("per_page", per_page, DEFAULT_PER_PAGE, MAX_PER_PAGE);
        errors.into_result(Page { number, per_page })
    }

    /// Zero-based index of the page's first element.
    pub fn offset(&self) -> u64 {
        (self.number - 1).saturating_mul(self.per_page)
    }

    /// The last page for `total` elements (1 when there are none).
    pub fn last(&self, total: u64) -> u64 {
        total.div_ceil(self.per_page).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_bounds() {
        assert_eq!(
            Page::parse(None, None),
            Ok(Page {
                number: 1,
                per_page: 100
            })
        );
        assert_eq!(Page::parse(Some("3"), Some("1000")).unwrap().offset(), 2000);
        let both = Page::parse(Some("0"), Some("1001")).unwrap_err();
        assert_eq!(both.fields().collect::<Vec<_>>(), ["page", "per_page"]);
        for bad in ["abc", "-1", "", "1.5"] {
            assert!(Page::parse(Some(bad), None).is_err(), "{bad}");
        }
        let page = Page {
            number: 1,
            per_page: 10,
        };
        assert_eq!((page.last(0), page.last(10), page.last(11)), (1, 1, 2));
    }
}
