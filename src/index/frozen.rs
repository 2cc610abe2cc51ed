//! Which dates each webstore has frozen (`store::kinds::deliveries`: a date's list kept as
//! it was when it locked), as the store's marks say: kept in memory so that a customer's
//! actor folds its orders' histories up to them and a reader answers a frozen date from its
//! list, without a read of the store each time. Set once a date's freeze is durable; read
//! from the store the first time a webstore is asked of (and again after a move brought its
//! records in).
//!
//! Must not touch: the frozen records themselves, the freezing (the service's), HTTP.

use dashmap::DashMap;

use crate::domain::catalogue::WebstoreIdx;
use crate::domain::day::Day;
use crate::store::kinds::deliveries::FreezeMark;

/// Each webstore's frozen dates, as far as known.
#[derive(Default)]
pub struct FrozenDates {
    marks: DashMap<WebstoreIdx, Option<FreezeMark>>,
}

impl FrozenDates {
    /// `webstore`'s mark, read with `load` the first time.
    pub fn mark<E>(
        &self,
        webstore: WebstoreIdx,
        load: impl FnOnce() -> Result<Option<FreezeMark>, E>,
    ) -> Result<Option<FreezeMark>, E> {
        if let Some(mark) = self.marks.get(&webstore) {
            return Ok(*mark);
        }
        let mark = load()?;
        Ok(*self.marks.entry(webstore).or_insert(mark))
    }

    /// `webstore`'s dates are frozen through `mark` (once durable). A mark never goes back.
    pub fn set(&self, webstore: WebstoreIdx, mark: FreezeMark) {
        let mut entry = self.marks.entry(webstore).or_insert(None);
        if entry.is_none_or(|held| held.through <= mark.through) {
            *entry = Some(mark);
        }
    }

    /// Forgets what is known of `webstore` (its records were just replaced by a move): read
    /// again from the store next time.
    pub fn forget(&self, webstore: WebstoreIdx) {
        self.marks.remove(&webstore);
    }

    /// The dates an order's history of `webstore` may fold away (`[since, before)`), if
    /// its dates are frozen as far as this knows (none read yet: nothing to fold).
    pub fn foldable(&self, webstore: WebstoreIdx) -> Option<(Day, Day)> {
        self.marks
            .get(&webstore)
            .and_then(|mark| *mark)
            .map(|mark| (mark.since, mark.through.plus(1)))
    }
}
