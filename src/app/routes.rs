//! The app's paths: which route an `/app` path is (what logs and metrics name it by), and
//! the date a day's or a week's path names. Pure.
//!
//! Must not touch: methods, sessions, answers (the entry decides what a route answers).

use crate::domain::day::{parse_iso_date, Day};

/// The app's routes: what logs and metrics name an `/app` request by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppRoute {
    /// `/app`: leads to the next delivery day.
    Home,
    /// `/app/sign_in`.
    SignIn,
    /// `/app/sign_out`.
    SignOut,
    /// `/app/deliveries/:date`.
    Day,
    /// `/app/deliveries/:date.csv`.
    DayCsv,
    /// `/app/weeks/:date`.
    Week,
    /// `/app/app.css`.
    Stylesheet,
    /// Any other path under `/app`.
    Unmatched,
}

impl AppRoute {
    /// The template, as logs and metrics name it.
    pub fn template(self) -> &'static str {
        match self {
            AppRoute::Home => "/app",
            AppRoute::SignIn => "/app/sign_in",
            AppRoute::SignOut => "/app/sign_out",
            AppRoute::Day => "/app/deliveries/:date",
            AppRoute::DayCsv => "/app/deliveries/:date.csv",
            AppRoute::Week => "/app/weeks/:date",
            AppRoute::Stylesheet => "/app/app.css",
            AppRoute::Unmatched => "/app/*",
        }
    }
}

/// Whether `path` is the app's.
pub fn owns(path: &str) -> bool {
    path == "/app" || path.starts_with("/app/")
}

/// The route of an app path, and the date it names (for a day and its CSV).
pub fn route(path: &str) -> (AppRoute, Option<Day>) {
    let path = path.strip_suffix('/').unwrap_or(path);
    match path {
        "/app" => return (AppRoute::Home, None),
        "/app/sign_in" => return (AppRoute::SignIn, None),
        "/app/sign_out" => return (AppRoute::SignOut, None),
        "/app/app.css" => return (AppRoute::Stylesheet, None),
        _ => {}
    }
    let (date, route) = if let Some(date) = path.strip_prefix("/app/weeks/") {
        (date, AppRoute::Week)
    } else if let Some(date) = path.strip_prefix("/app/deliveries/") {
        match date.strip_suffix(".csv") {
            Some(date) => (date, AppRoute::DayCsv),
            None => (date, AppRoute::Day),
        }
    } else {
        return (AppRoute::Unmatched, None);
    };
    // `parse_iso_date` trims; a path's date is exactly ten characters.
    match parse_iso_date(date).filter(|_| date.len() == 10) {
        Some(day) => (route, Some(day)),
        None => (AppRoute::Unmatched, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn app_paths_resolve_to_routes_and_dates() {
        let day = parse_iso_date("2026-11-26");
        assert_eq!(route("/app"), (AppRoute::Home, None));
        assert_eq!(route("/app/"), (AppRoute::Home, None));
        assert_eq!(route("/app/sign_in"), (AppRoute::SignIn, None));
        assert_eq!(route("/app/deliveries/2026-11-26"), (AppRoute::Day, day));
        assert_eq!(
            route("/app/deliveries/2026-11-26.csv"),
            (AppRoute::DayCsv, day)
        );
        for unmatched in [
            "/app/deliveries/2026-02-30",
            "/app/deliveries/2026-11-26.pdf",
            "/app/deliveries/ 2026-11-26",
            "/app/deliveries/",
            "/app/x",
        ] {
            assert_eq!(route(unmatched), (AppRoute::Unmatched, None), "{unmatched}");
        }
        assert!(owns("/app") && owns("/app/x") && !owns("/apple") && !owns("/v1/app"));
    }
}
