//! The delivery pages of the signed-in producer's webstore: a day (the packing summary and
//! the routes, or the day's deliveries for the CSV download) and a week, each read from the
//! service on the node that serves the webstore, counted against the webstore's read quota
//! and admitted in its turn like its API's reads.
//!
//! Must not touch: sign-in and cookies, the CSV itself (the API's front end writes it).

use askama::Template;
use warp::http::StatusCode;

use crate::domain::day::Day;
use crate::domain::order::schedule::delivery_days_around;
use crate::quotas::Kind;
use crate::service::Service;

use super::pages::{DayPage, WeekPage};
use super::responses::html;
use super::sign_in::signed_in_here;
use super::{day, week, AppAnswer, AppError, AppRequest, DayView};

/// `GET /app/deliveries/:date` and its CSV.
pub(super) async fn day(
    service: &Service,
    request: &AppRequest<'_>,
    date: Day,
    csv: bool,
) -> Result<AppAnswer, AppError> {
    let session = signed_in_here(service, request.headers)?;
    let webstore = session.webstore;
    // A page is a read of its webstore, under its quotas and fair admission like its API's.
    let checked = service
        .quotas()
        .check(&webstore, Kind::Read)
        .map_err(AppError::OverQuota)?;
    let _slot = checked.admit().await;
    let list = service.day_list(&webstore, date).await?;
    if csv {
        return Ok(AppAnswer::DeliveriesCsv {
            date,
            webstore,
            deliveries: list.deliveries,
        });
    }
    let view = DayView::of(&list, &webstore);
    let (prev, next) = delivery_days_around(date, webstore.delivery_week_days());
    let page = DayPage {
        webstore: &webstore.settings.name,
        date: date.date().to_string(),
        date_label: day::long_date(date),
        prev: prev.date().to_string(),
        prev_label: day::short_date(prev),
        next: next.date().to_string(),
        next_label: day::short_date(next),
        week: date.week_start().date().to_string(),
        form_token: &session.form_token,
        day: &view,
    };
    Ok(AppAnswer::Page(html(StatusCode::OK, page.render())))
}

/// `GET /app/weeks/:date`: the seven days from `date`.
pub(super) async fn week(
    service: &Service,
    request: &AppRequest<'_>,
    first: Day,
) -> Result<AppAnswer, AppError> {
    let session = signed_in_here(service, request.headers)?;
    let webstore = session.webstore;
    // A page is a read of its webstore, under its quotas and fair admission like its API's.
    let checked = service
        .quotas()
        .check(&webstore, Kind::Read)
        .map_err(AppError::OverQuota)?;
    let _slot = checked.admit().await;
    let mut days = Vec::with_capacity(week::DAYS as usize);
    for offset in 0..week::DAYS {
        let date = first.plus(offset);
        days.push((date, service.day_list(&webstore, date).await?));
    }
    let view = week::WeekView::of(&days, &webstore);
    let (prev, next) = (first.plus(-week::DAYS), first.plus(week::DAYS));
    let page = WeekPage {
        webstore: &webstore.settings.name,
        first: first.date().to_string(),
        range_label: week::range_label(first),
        prev: prev.date().to_string(),
        prev_label: day::short_date(prev),
        next: next.date().to_string(),
        next_label: day::short_date(next),
        form_token: &session.form_token,
        week: &view,
    };
    Ok(AppAnswer::Page(html(StatusCode::OK, page.render())))
}
