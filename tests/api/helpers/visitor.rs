//! A browser of the producers' app without JavaScript, over plain HTTP: it keeps the app's
//! cookies as a browser would (a cleared or `Max-Age=0` cookie is forgotten), follows no
//! redirect by itself, sends forms with its page's `Origin`, and fails the test on a 5xx
//! other than 503 (but for the `_whatever_it_is` requests of probes that record every
//! answer).

use std::collections::BTreeMap;

use reqwest::header::{HeaderMap, LOCATION, SET_COOKIE};

use super::TestApp;

/// A browser without JavaScript: it keeps the app's cookies and follows nothing by itself.
pub struct Visitor {
    /// The node its requests go to, as `http://127.0.0.1:PORT`.
    base: String,
    /// Its HTTP client (no redirects followed), for a request built by hand.
    pub client: reqwest::Client,
    pub cookies: BTreeMap<String, String>,
    /// The `Origin` its forms carry (a browser sends the page's origin with every POST);
    /// a test may set another.
    pub origin: String,
}

/// An answer of the app.
pub struct Page {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: String,
}

impl Page {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }

    pub fn location(&self) -> Option<&str> {
        self.header(LOCATION.as_str())
    }

    /// Every value of attribute `name` on the page, in order.
    pub fn attributes(&self, name: &str) -> Vec<String> {
        let needle = format!(" {name}=\"");
        self.body
            .match_indices(&needle)
            .map(|(at, _)| {
                let rest = &self.body[at + needle.len()..];
                rest[..rest.find('"').expect("a closed attribute")].to_owned()
            })
            .collect()
    }

    /// `(first, second)` attribute pairs of the elements carrying both, in order.
    pub fn pairs(&self, first: &str, second: &str) -> Vec<(u64, u64)> {
        let needle = format!(" {first}=\"");
        self.body
            .match_indices(&needle)
            .map(|(at, _)| {
                let element = &self.body[at..at + self.body[at..].find('>').unwrap()];
                let value = |name: &str| -> u64 {
                    let key = format!(" {name}=\"");
                    let start = element.find(&key).expect(name) + key.len();
                    element[start..start + element[start..].find('"').unwrap()]
                        .parse()
                        .unwrap()
                };
                (value(first), value(second))
            })
            .collect()
    }

    /// The form token of the page's (first) form.
    pub fn form_token(&self) -> String {
        let needle = "name=\"form_token\" value=\"";
        let start = self.body.find(needle).expect("a form token") + needle.len();
        self.body[start..start + 64].to_owned()
    }
}

impl Visitor {
    /// A visitor of `app`, without cookies.
    pub fn new(app: &TestApp) -> Self {
        Visitor::at(&app.url(""))
    }

    /// A visitor of the app at `base` (`http://127.0.0.1:PORT`: a node, or a front end
    /// before the nodes), without cookies.
    pub fn at(base: &str) -> Self {
        let origin = base.to_owned();
        Visitor {
            base: origin.clone(),
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            cookies: BTreeMap::new(),
            origin,
        }
    }

    /// Goes on to node `app` with its cookies (a front end sent it there), its forms now
    /// from that node's pages.
    pub fn visit(&mut self, app: &TestApp) {
        self.base = app.url("");
        self.origin = self.base.clone();
    }

    /// Its cookies as a `Cookie` header's value.
    pub fn cookie_header(&self) -> String {
        self.cookies
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    async fn answer(&mut self, request: reqwest::RequestBuilder) -> Page {
        let page = self.answer_whatever_it_is(request).await;
        // A 503 says "not now, nothing was done" (a webstore frozen for a move): the test
        // asserts it where it is expected. Any other 5xx is a failure of the app.
        assert!(
            page.status < 500 || page.status == 503,
            "a 5xx from the app: {} {}",
            page.status,
            page.body
        );
        page
    }

    /// The answer to `request`, its cookies kept, whatever its status (a probe that records
    /// every answer, a 5xx included).
    async fn answer_whatever_it_is(&mut self, request: reqwest::RequestBuilder) -> Page {
        let response = request
            .header("Cookie", self.cookie_header())
            .send()
            .await
            .expect("the app answers");
        for set in response.headers().get_all(SET_COOKIE) {
            let set = set.to_str().unwrap();
            let (name, value) = set.split(';').next().unwrap().split_once('=').unwrap();
            if value.is_empty() || set.contains("Max-Age=0") {
                self.cookies.remove(name);
            } else {
                self.cookies.insert(name.to_owned(), value.to_owned());
            }
        }
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.text().await.unwrap();
        Page {
            status,
            headers,
            body,
        }
    }

    pub async fn get(&mut self, path: &str) -> Page {
        let request = self.client.get(format!("{}{path}", self.base));
        self.answer(request).await
    }

    pub async fn post(&mut self, path: &str, form: &[(&str, &str)]) -> Page {
        let request = self.form_request(path, form);
        self.answer(request).await
    }

    /// [`Visitor::get`] that fails nothing: whatever the answer (a 5xx included), it is
    /// returned.
    pub async fn get_whatever_it_is(&mut self, path: &str) -> Page {
        let request = self.client.get(format!("{}{path}", self.base));
        self.answer_whatever_it_is(request).await
    }

    /// [`Visitor::post`] that fails nothing.
    pub async fn post_whatever_it_is(&mut self, path: &str, form: &[(&str, &str)]) -> Page {
        let request = self.form_request(path, form);
        self.answer_whatever_it_is(request).await
    }

    fn form_request(&self, path: &str, form: &[(&str, &str)]) -> reqwest::RequestBuilder {
        self.client
            .post(format!("{}{path}", self.base))
            .header("Origin", self.origin.clone())
            .header("Sec-Fetch-Site", "same-origin")
            .form(form)
    }

    /// Opens the sign-in form and posts it.
    pub async fn sign_in(&mut self, (email, password): (&str, &str)) -> Page {
        let form = self.get("/app/sign_in").await;
        assert_eq!(form.status, 200, "{}", form.body);
        let token = form.form_token();
        self.post(
            "/app/sign_in",
            &[
                ("email", email),
                ("password", password),
                ("form_token", &token),
            ],
        )
        .await
    }

    /// A visitor of `app` signed in as `producer`.
    pub async fn signed_in(app: &TestApp, producer: (&str, &str)) -> Visitor {
        let mut visitor = Visitor::new(app);
        let answer = visitor.sign_in(producer).await;
        assert_eq!(answer.status, 303, "{}", answer.body);
        assert_eq!(answer.location(), Some("/app"));
        visitor
    }
}
