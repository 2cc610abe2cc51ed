//! The app's pages: askama templates (in `src/app/templates/`, compiled into the binary and
//! checked when it is built), each with the values it shows. The templates escape every
//! value for HTML; none is marked safe. Must not touch: requests, the service.

use askama::Template;

use super::day::DayView;
use super::week::WeekView;

/// The sign-in form, with any alerts of a failed attempt.
#[derive(Template)]
#[template(path = "sign_in.html")]
pub struct SignInPage<'a> {
    /// What went wrong, one line each.
    pub alerts: &'a [String],
    /// The email to fill in again.
    pub email: &'a str,
    /// The form token (the form cookie's value).
    pub form_token: &'a str,
}

/// A page that only says something: an error, or a page that is not there.
#[derive(Template)]
#[template(path = "message.html")]
pub struct MessagePage<'a> {
    /// The heading.
    pub title: &'a str,
    /// The sentence under it.
    pub detail: &'a str,
    /// Where to go from here.
    pub link: &'a str,
    /// The link's text.
    pub link_text: &'a str,
}

/// A delivery day.
#[derive(Template)]
#[template(path = "day.html")]
pub struct DayPage<'a> {
    /// The webstore's name.
    pub webstore: &'a str,
    /// The date, `YYYY-MM-DD`.
    pub date: String,
    /// The date as a producer reads it.
    pub date_label: String,
    /// The delivery day before, `YYYY-MM-DD`, and its label.
    pub prev: String,
    /// Its label.
    pub prev_label: String,
    /// The delivery day after, `YYYY-MM-DD`.
    pub next: String,
    /// Its label.
    pub next_label: String,
    /// The first day of its week (Monday), `YYYY-MM-DD`: the week page's address.
    pub week: String,
    /// The sign-out form's token.
    pub form_token: &'a str,
    /// The day's summary and routes.
    pub day: &'a DayView,
}

/// A week: its delivery days and what to pack on each.
#[derive(Template)]
#[template(path = "week.html")]
pub struct WeekPage<'a> {
    /// The webstore's name.
    pub webstore: &'a str,
    /// The week's first date, `YYYY-MM-DD`.
    pub first: String,
    /// The week's dates as a heading says them.
    pub range_label: String,
    /// The week before's first date, and its label.
    pub prev: String,
    /// Its label.
    pub prev_label: String,
    /// The week after's first date.
    pub next: String,
    /// Its label.
    pub next_label: String,
    /// The sign-out form's token.
    pub form_token: &'a str,
    /// The week's days and totals.
    pub week: &'a WeekView,
}
