//! The route table as a pure function of method and path. Paths are matched before methods,
//! so a known path with another method is a 405 with `Allow`, and only an unknown path is a
//! 404 (the trap of warp issue #77, where method-first filter chains answer 405 for anything).
//!
//! Must not touch: what a route does (`super::handlers`), I/O.

use warp::http::Method;

use crate::app::AppRoute;
use crate::domain::day::{parse_iso_date, Day};
use crate::domain::fields::parse_digits;
use crate::domain::ids::{CustomerId, OrderId};
use crate::metrics::RouteLabel;

/// A request the API answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `GET /v1/ping`.
    Ping,
    /// `GET /v1/customers`.
    ListCustomers,
    /// `POST /v1/customers`.
    CreateCustomer,
    /// `POST /v1/customers/sign_in`.
    SignIn,
    /// `GET /v1/customers/:id`.
    GetCustomer(CustomerId),
    /// `PATCH` or `PUT /v1/customers/:id`.
    UpdateCustomer(CustomerId),
    /// `GET /v1/orders`.
    ListOrders,
    /// `POST /v1/orders`.
    CreateOrder,
    /// `GET /v1/orders/:id`.
    GetOrder(OrderId),
    /// `PATCH` or `PUT /v1/orders/:id`.
    UpdateOrder(OrderId),
    /// `GET /v1/orders/:id/deliveries`.
    OrderDeliveries(OrderId),
    /// `GET /v1/boxes`.
    ListBoxes,
    /// `GET /v1/boxes/:id`.
    GetBox(u64),
    /// `GET /v1/delivery_services`.
    ListDeliveryServices,
    /// `GET /v1/delivery_services/:id`.
    GetDeliveryService(u64),
    /// `GET /v1/webstore`.
    GetWebstore,
    /// `GET /v1/deliveries`.
    ListDeliveries,
    /// `GET /v1/openapi.json`.
    OpenApi,
    /// `GET /v1/events`.
    ListEvents,
    /// `GET /v1/customers/:id/account`.
    GetAccount(CustomerId),
    /// `PATCH /v1/customers/:id/account`.
    SetAccount(CustomerId),
    /// `GET /v1/customers/:id/transactions`.
    ListTransactions(CustomerId),
    /// `GET /v1/transactions`: the webstore's books.
    ListBooks,
    /// `GET /v1/customers/:id/payments`.
    ListPayments(CustomerId),
    /// `POST /v1/customers/:id/payments`.
    CreatePayment(CustomerId),
    /// `POST /v1/customers/:id/adjustments`.
    CreateAdjustment(CustomerId),
    /// `GET /v1/payments/:id`.
    GetPayment(u64),
    /// `POST /v1/payments/:id/reversal`.
    ReversePayment(u64),
    /// `PUT /v1/orders/:id/deliveries/:date` (`None`: a date segment that is no date).
    MarkDelivery(OrderId, Option<Day>),
}

/// Why a request matched no endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteError {
    /// No such path.
    NotFound,
    /// The path exists; these methods are allowed on it.
    MethodNotAllowed(&'static str),
}

/// A route template: what logs and metrics name a request by (never its raw path). A
/// small closed set, so that metric labels stay bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `/v1/ping`.
    Ping,
    /// `/v1/customers`.
    Customers,
    /// `/v1/customers/sign_in`.
    SignIn,
    /// `/v1/customers/:id`.
    Customer,
    /// `/v1/orders`.
    Orders,
    /// `/v1/orders/:id`.
    Order,
    /// `/v1/orders/:id/deliveries`.
    OrderDeliveries,
    /// `/v1/boxes`.
    Boxes,
    /// `/v1/boxes/:id`.
    Box,
    /// `/v1/delivery_services`.
    DeliveryServices,
    /// `/v1/delivery_services/:id`.
    DeliveryService,
    /// `/v1/webstore`.
    Webstore,
    /// `/v1/deliveries`.
    Deliveries,
    /// `/v1/openapi.json`.
    OpenApi,
    /// `/v1/events`.
    Events,
    /// `/v1/customers/:id/account`.
    Account,
    /// `/v1/customers/:id/transactions`.
    Transactions,
    /// `/v1/transactions`.
    Books,
    /// `/v1/customers/:id/payments`.
    CustomerPayments,
    /// `/v1/customers/:id/adjustments`.
    Adjustments,
    /// `/v1/payments/:id`.
    Payment,
    /// `/v1/payments/:id/reversal`.
    PaymentReversal,
    /// `/v1/orders/:id/deliveries/:date`.
    OrderDelivery,
    /// `/metrics`.
    Metrics,
    /// `/health`.
    Health,
    /// `/app`.
    AppHome,
    /// `/app/sign_in`.
    AppSignIn,
    /// `/app/sign_out`.
    AppSignOut,
    /// `/app/deliveries/:date`.
    AppDay,
    /// `/app/deliveries/:date.csv`.
    AppDayCsv,
    /// `/app/weeks/:date`.
    AppWeek,
    /// `/app/app.css`.
    AppStylesheet,
    /// Any other path under `/app`.
    AppUnmatched,
    /// Any path no endpoint has.
    Unmatched,
}

impl From<AppRoute> for Route {
    fn from(route: AppRoute) -> Route {
        match route {
            AppRoute::Home => Route::AppHome,
            AppRoute::SignIn => Route::AppSignIn,
            AppRoute::SignOut => Route::AppSignOut,
            AppRoute::Day => Route::AppDay,
            AppRoute::DayCsv => Route::AppDayCsv,
            AppRoute::Week => Route::AppWeek,
            AppRoute::Stylesheet => Route::AppStylesheet,
            AppRoute::Unmatched => Route::AppUnmatched,
        }
    }
}

impl Route {
    /// The template, as logs and metrics name it.
    pub fn template(self) -> &'static str {
        use Route::*;
        match self {
            Ping => "/v1/ping",
            Customers => "/v1/customers",
            SignIn => "/v1/customers/sign_in",
            Customer => "/v1/customers/:id",
            Orders => "/v1/orders",
            Order => "/v1/orders/:id",
            OrderDeliveries => "/v1/orders/:id/deliveries",
            Boxes => "/v1/boxes",
            Box => "/v1/boxes/:id",
            DeliveryServices => "/v1/delivery_services",
            DeliveryService => "/v1/delivery_services/:id",
            Webstore => "/v1/webstore",
            Deliveries => "/v1/deliveries",
            OpenApi => "/v1/openapi.json",
            Events => "/v1/events",
            Account => "/v1/customers/:id/account",
            Transactions => "/v1/customers/:id/transactions",
            Books => "/v1/transactions",
            CustomerPayments => "/v1/customers/:id/payments",
            Adjustments => "/v1/customers/:id/adjustments",
            Payment => "/v1/payments/:id",
            PaymentReversal => "/v1/payments/:id/reversal",
            OrderDelivery => "/v1/orders/:id/deliveries/:date",
            Metrics => "/metrics",
            Health => "/health",
            AppHome => AppRoute::Home.template(),
            AppSignIn => AppRoute::SignIn.template(),
            AppSignOut => AppRoute::SignOut.template(),
            AppDay => AppRoute::Day.template(),
            AppDayCsv => AppRoute::DayCsv.template(),
            AppWeek => AppRoute::Week.template(),
            AppStylesheet => AppRoute::Stylesheet.template(),
            AppUnmatched => AppRoute::Unmatched.template(),
            Unmatched => "unmatched",
        }
    }

    /// The route as the request metrics label it (its place in this enum keys their cache).
    pub fn label(self) -> RouteLabel {
        RouteLabel {
            index: self as u8,
            template: self.template(),
        }
    }
}

impl Endpoint {
    /// Whether the endpoint changes what the store holds (a sign-in only reads).
    pub fn writes(self) -> bool {
        use Endpoint::*;
        matches!(
            self,
            CreateCustomer
                | UpdateCustomer(_)
                | CreateOrder
                | UpdateOrder(_)
                | CreatePayment(_)
                | CreateAdjustment(_)
                | ReversePayment(_)
                | MarkDelivery(..)
                | SetAccount(_)
        )
    }

    /// Whether the endpoint reads a request body.
    pub fn has_body(self) -> bool {
        use Endpoint::*;
        matches!(
            self,
            CreateCustomer
                | SignIn
                | UpdateCustomer(_)
                | CreateOrder
                | UpdateOrder(_)
                | CreatePayment(_)
                | CreateAdjustment(_)
                | ReversePayment(_)
                | MarkDelivery(..)
                | SetAccount(_)
        )
    }

    /// The route template of the endpoint.
    pub fn route(self) -> Route {
        use Endpoint::*;
        match self {
            Ping => Route::Ping,
            ListCustomers | CreateCustomer => Route::Customers,
            SignIn => Route::SignIn,
            GetCustomer(_) | UpdateCustomer(_) => Route::Customer,
            ListOrders | CreateOrder => Route::Orders,
            GetOrder(_) | UpdateOrder(_) => Route::Order,
            OrderDeliveries(_) => Route::OrderDeliveries,
            ListBoxes => Route::Boxes,
            GetBox(_) => Route::Box,
            ListDeliveryServices => Route::DeliveryServices,
            GetDeliveryService(_) => Route::DeliveryService,
            GetWebstore => Route::Webstore,
            ListDeliveries => Route::Deliveries,
            OpenApi => Route::OpenApi,
            ListEvents => Route::Events,
            GetAccount(_) | SetAccount(_) => Route::Account,
            ListTransactions(_) => Route::Transactions,
            ListBooks => Route::Books,
            ListPayments(_) | CreatePayment(_) => Route::CustomerPayments,
            CreateAdjustment(_) => Route::Adjustments,
            GetPayment(_) => Route::Payment,
            ReversePayment(_) => Route::PaymentReversal,
            MarkDelivery(..) => Route::OrderDelivery,
        }
    }
}

/// The route of any request: its endpoint's, or [`Route::Unmatched`] for a path no endpoint
/// has (so that logs and metrics never carry raw, unbounded paths).
pub fn route(method: &Method, path: &str) -> Route {
    if crate::app::owns(path) {
        return crate::app::route(path).0.into();
    }
    match resolve(method, path) {
        Ok(endpoint) => endpoint.route(),
        // A known path with another method: name the path by any method it allows.
        Err(RouteError::MethodNotAllowed(allow)) => {
            let allowed = allow.split(", ").next().unwrap_or("GET");
            Method::from_bytes(allowed.as_bytes())
                .ok()
                .and_then(|method| resolve(&method, path).ok())
                .map_or(Route::Unmatched, Endpoint::route)
        }
        Err(RouteError::NotFound) if path == "/metrics" => Route::Metrics,
        Err(RouteError::NotFound) if path == "/health" => Route::Health,
        Err(RouteError::NotFound) => Route::Unmatched,
    }
}

/// True for requests that need credentials: everything under `/v1` except `GET /v1/ping`.
pub fn needs_credentials(method: &Method, path: &str) -> bool {
    let public = method == Method::GET && (path == "/v1/ping" || path == "/v1/openapi.json");
    (path == "/v1" || path.starts_with("/v1/")) && !public
}

/// Finds the endpoint for a request.
pub fn resolve(method: &Method, path: &str) -> Result<Endpoint, RouteError> {
    use Endpoint::*;
    let rest = path.strip_prefix("/v1/").ok_or(RouteError::NotFound)?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let mut segments = rest.split('/');
    let resource = segments.next().unwrap_or_default();
    let member = segments.next();
    let sub = segments.next();
    let leaf = segments.next();
    if segments.next().is_some() {
        return Err(RouteError::NotFound);
    }
    let id = |segment: &str| {
        parse_digits(segment)
            .filter(|id| *id > 0)
            .ok_or(RouteError::NotFound)
    };
    let get = Method::GET;
    let post = Method::POST;
    if let Some(leaf) = leaf {
        return match (resource, member, sub) {
            ("orders", Some(segment), Some("deliveries")) => {
                let order = OrderId(id(segment)?);
                match *method {
                    Method::PUT => Ok(MarkDelivery(order, parse_iso_date(leaf))),
                    _ => Err(RouteError::MethodNotAllowed("PUT")),
                }
            }
            _ => Err(RouteError::NotFound),
        };
    }
    if let Some(sub) = sub {
        return match (resource, member, sub) {
            ("orders", Some(segment), "deliveries") => {
                only(method, &get, OrderDeliveries(OrderId(id(segment)?)))
            }
            ("customers", Some(segment), "account") => {
                let customer = CustomerId(id(segment)?);
                match *method {
                    Method::GET => Ok(GetAccount(customer)),
                    Method::PATCH => Ok(SetAccount(customer)),
                    _ => Err(RouteError::MethodNotAllowed("GET, PATCH")),
                }
            }
            ("customers", Some(segment), "transactions") => {
                only(method, &get, ListTransactions(CustomerId(id(segment)?)))
            }
            ("customers", Some(segment), "payments") => {
                let customer = CustomerId(id(segment)?);
                match *method {
                    Method::GET => Ok(ListPayments(customer)),
                    Method::POST => Ok(CreatePayment(customer)),
                    _ => Err(RouteError::MethodNotAllowed("GET, POST")),
                }
            }
            ("customers", Some(segment), "adjustments") => {
                only(method, &post, CreateAdjustment(CustomerId(id(segment)?)))
            }
            ("payments", Some(segment), "reversal") => {
                only(method, &post, ReversePayment(id(segment)?))
            }
            _ => Err(RouteError::NotFound),
        };
    }
    match (resource, member) {
        ("ping", None) => only(method, &get, Ping),
        ("customers", None) => match *method {
            Method::GET => Ok(ListCustomers),
            Method::POST => Ok(CreateCustomer),
            _ => Err(RouteError::MethodNotAllowed("GET, POST")),
        },
        ("customers", Some("sign_in")) => only(method, &post, SignIn),
        ("customers", Some(segment)) => {
            let id = CustomerId(id(segment)?);
            match *method {
                Method::GET => Ok(GetCustomer(id)),
                Method::PATCH | Method::PUT => Ok(UpdateCustomer(id)),
                _ => Err(RouteError::MethodNotAllowed("GET, PATCH, PUT")),
            }
        }
        ("orders", None) => match *method {
            Method::GET => Ok(ListOrders),
            Method::POST => Ok(CreateOrder),
            _ => Err(RouteError::MethodNotAllowed("GET, POST")),
        },
        ("orders", Some(segment)) => {
            let id = OrderId(id(segment)?);
            match *method {
                Method::GET => Ok(GetOrder(id)),
                Method::PATCH | Method::PUT => Ok(UpdateOrder(id)),
                _ => Err(RouteError::MethodNotAllowed("GET, PATCH, PUT")),
            }
        }
        ("boxes", None) => only(method, &get, ListBoxes),
        ("boxes", Some(segment)) => only(method, &get, GetBox(id(segment)?)),
        ("delivery_services", None) => only(method, &get, ListDeliveryServices),
        ("delivery_services", Some(segment)) => {
            only(method, &get, GetDeliveryService(id(segment)?))
        }
        ("webstore", None) => only(method, &get, GetWebstore),
        ("deliveries", None) => only(method, &get, ListDeliveries),
        ("openapi.json", None) => only(method, &get, OpenApi),
        ("events", None) => only(method, &get, ListEvents),
        ("payments", Some(segment)) => only(method, &get, GetPayment(id(segment)?)),
        ("transactions", None) => only(method, &get, ListBooks),
        _ => Err(RouteError::NotFound),
    }
}

fn only(method: &Method, allowed: &Method, endpoint: Endpoint) -> Result<Endpoint, RouteError> {
    if method == allowed {
        Ok(endpoint)
    } else if *allowed == Method::GET {
        Err(RouteError::MethodNotAllowed("GET"))
    } else {
        Err(RouteError::MethodNotAllowed("POST"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_before_methods() {
        assert_eq!(
            resolve(&Method::GET, "/v1/customers/12"),
            Ok(Endpoint::GetCustomer(CustomerId(12)))
        );
        assert_eq!(
            resolve(&Method::PUT, "/v1/customers/12/"),
            Ok(Endpoint::UpdateCustomer(CustomerId(12)))
        );
        assert_eq!(
            resolve(&Method::DELETE, "/v1/customers/12"),
            Err(RouteError::MethodNotAllowed("GET, PATCH, PUT"))
        );
        assert_eq!(
            resolve(&Method::GET, "/v1/customers/sign_in"),
            Err(RouteError::MethodNotAllowed("POST"))
        );
        assert_eq!(
            resolve(&Method::POST, "/v1/webstore"),
            Err(RouteError::MethodNotAllowed("GET"))
        );
        for missing in [
            "/v1/customers/0",
            "/v1/customers/abc",
            "/v1/customers/1/x",
            "/v1/nothing",
            "/v2/ping",
            "/v1",
            "/",
        ] {
            assert_eq!(
                resolve(&Method::GET, missing),
                Err(RouteError::NotFound),
                "{missing}"
            );
        }
    }

    #[test]
    fn an_account_s_paths_resolve_with_their_methods() {
        let c = CustomerId(7);
        for (method, path, endpoint) in [
            (
                Method::GET,
                "/v1/customers/7/account",
                Endpoint::GetAccount(c),
            ),
            (
                Method::PATCH,
                "/v1/customers/7/account",
                Endpoint::SetAccount(c),
            ),
            (
                Method::GET,
                "/v1/customers/7/transactions",
                Endpoint::ListTransactions(c),
            ),
            (
                Method::GET,
                "/v1/customers/7/payments",
                Endpoint::ListPayments(c),
            ),
            (
                Method::POST,
                "/v1/customers/7/payments",
                Endpoint::CreatePayment(c),
            ),
            (
                Method::POST,
                "/v1/customers/7/adjustments",
                Endpoint::CreateAdjustment(c),
            ),
            (Method::GET, "/v1/payments/9", Endpoint::GetPayment(9)),
            (
                Method::POST,
                "/v1/payments/9/reversal",
                Endpoint::ReversePayment(9),
            ),
        ] {
            assert_eq!(resolve(&method, path), Ok(endpoint), "{method} {path}");
        }
        for write in [
            Endpoint::CreatePayment(c),
            Endpoint::CreateAdjustment(c),
            Endpoint::ReversePayment(9),
            Endpoint::SetAccount(c),
        ] {
            assert!(write.writes() && write.has_body(), "{write:?}");
        }
        assert_eq!(
            resolve(&Method::POST, "/v1/customers/7/account"),
            Err(RouteError::MethodNotAllowed("GET, PATCH"))
        );
        let friday = parse_iso_date("2026-11-27");
        assert!(friday.is_some());
        assert_eq!(
            resolve(&Method::PUT, "/v1/orders/5/deliveries/2026-11-27"),
            Ok(Endpoint::MarkDelivery(OrderId(5), friday))
        );
        assert_eq!(
            resolve(&Method::PUT, "/v1/orders/5/deliveries/someday"),
            Ok(Endpoint::MarkDelivery(OrderId(5), None))
        );
        assert_eq!(
            resolve(&Method::GET, "/v1/orders/5/deliveries/2026-11-27"),
            Err(RouteError::MethodNotAllowed("PUT"))
        );
        assert_eq!(
            resolve(&Method::PUT, "/v1/orders/5/deliveries/2026-11-27/x"),
            Err(RouteError::NotFound)
        );
        let mark = Endpoint::MarkDelivery(OrderId(5), friday);
        assert!(mark.writes() && mark.has_body());
        assert_eq!(
            resolve(&Method::DELETE, "/v1/customers/7/payments"),
            Err(RouteError::MethodNotAllowed("GET, POST"))
        );
        assert_eq!(
            resolve(&Method::GET, "/v1/payments/9/reversal"),
            Err(RouteError::MethodNotAllowed("POST"))
        );
        for missing in ["/v1/payments/0", "/v1/customers/x/account", "/v1/payments"] {
            assert_eq!(
                resolve(&Method::GET, missing),
                Err(RouteError::NotFound),
                "{missing}"
            );
        }
    }

    #[test]
    fn credentials_guard_everything_under_v1_but_ping() {
        assert!(needs_credentials(&Method::GET, "/v1/customers"));
        assert!(needs_credentials(&Method::GET, "/v1/whatever"));
        assert!(needs_credentials(&Method::POST, "/v1/ping"));
        assert!(!needs_credentials(&Method::GET, "/v1/ping"));
        assert!(!needs_credentials(&Method::GET, "/health"));
        assert!(!needs_credentials(&Method::GET, "/v1/openapi.json"));
    }

    #[test]
    fn templates_never_carry_raw_paths() {
        assert_eq!(
            route(&Method::GET, "/v1/customers/12").template(),
            "/v1/customers/:id"
        );
        assert_eq!(
            route(&Method::DELETE, "/v1/customers/12").template(),
            "/v1/customers/:id"
        );
        assert_eq!(
            route(&Method::POST, "/v1/customers/sign_in").template(),
            "/v1/customers/sign_in"
        );
        assert_eq!(
            route(&Method::GET, "/v1/customers/abc").template(),
            "unmatched"
        );
        assert_eq!(
            route(&Method::GET, "/v1/nothing/at/all").template(),
            "unmatched"
        );
        assert_eq!(route(&Method::GET, "/metrics").template(), "/metrics");
    }
}
