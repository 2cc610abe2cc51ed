//! A real browser for the producers' web app: Debian's headless Chromium driven through its
//! `chromedriver` (WebDriver) with fantoccini, plus what WebDriver alone does not offer,
//! through chromedriver's DevTools bridge (`POST /session/{id}/goog/cdp/execute`): printing
//! to PDF, emulating print media and the viewport of a phone. And axe-core, run inside the
//! page (WebDriver's scripts are not subject to the page's Content-Security-Policy).
//!
//! [`Browser::start`] returns `None` after [`skip_or_fail`] where Chromium or chromedriver
//! is missing; [`axe_core_source`] likewise where axe-core was not fetched (`.ci/axe-core`).
//! The chromedriver process and the Chromium it starts are owned by the [`Browser`], whose
//! `Drop` ends the session (Chromium quits), then kills chromedriver and reaps it, and kills
//! whatever Chromium process is left (found by the profile directory that is the Browser's
//! alone); every wait is bounded.

use std::future::Future;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator};
use reqwest::{Method, Url};
use serde_json::{json, Value};
use tempfile::TempDir;

use super::skip::{host_program, skip_or_fail};

/// How long chromedriver may take to answer `/status` ready, and Chromium to start.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one WebDriver command may take (a page load, a script, a PDF).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the `Drop` waits for chromedriver to end the session before killing everything.
const QUIT_TIMEOUT: Duration = Duration::from_secs(10);

/// The environment variable naming axe-core's `axe.min.js`, where it is not in the default
/// place (`target/axe-core/axe.min.js`, where `.ci/axe-core` puts it).
pub const AXE_JS: &str = "BOXSUB_AXE_JS";

/// A viewport the tests look at pages in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Viewport {
    /// A laptop's browser window: 1280×900.
    Desktop,
    /// A phone held upright: 390×844 CSS pixels, as an iPhone 12 to 15.
    Phone,
}

impl Viewport {
    /// Width and height in CSS pixels.
    pub fn size(self) -> (u32, u32) {
        match self {
            Viewport::Desktop => (1280, 900),
            Viewport::Phone => (390, 844),
        }
    }
}

/// What a [`Browser`] is started with.
#[derive(Clone, Copy, Debug)]
pub struct BrowserOptions {
    /// Whether pages may run JavaScript (the WebDriver's own scripts run either way).
    pub javascript: bool,
}

impl Default for BrowserOptions {
    fn default() -> Self {
        Self { javascript: true }
    }
}

/// A headless Chromium session and the chromedriver that drives it.
pub struct Browser {
    client: Client,
    session_id: String,
    driver: Child,
    driver_port: u16,
    /// Chromium's profile and chromedriver's log, removed once both have stopped.
    _scratch: TempDir,
}

/// The path of a program of the host, as Debian installs the browser's (`/usr/bin`).
fn browser_program(name: &str) -> Option<PathBuf> {
    let debian = Path::new("/usr/bin").join(name);
    if debian.is_file() {
        return Some(debian);
    }
    host_program(name)
}

/// A port of 127.0.0.1 that was free a moment ago.
fn free_port() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("binding a free port");
    listener.local_addr().expect("a bound address").port()
}

/// `future`, or a panic naming `what` when it takes longer than [`COMMAND_TIMEOUT`] or fails.
async fn bounded<T, E: std::fmt::Debug>(
    what: &str,
    future: impl Future<Output = Result<T, E>>,
) -> T {
    match tokio::time::timeout(COMMAND_TIMEOUT, future).await {
        Ok(Ok(value)) => value,
        Ok(Err(error)) => panic!("browser: {what} failed: {error:?}"),
        Err(_) => panic!("browser: {what} took longer than {COMMAND_TIMEOUT:?}"),
    }
}

/// A DevTools protocol command sent through chromedriver's `goog/cdp/execute` endpoint.
#[derive(Debug)]
struct DevTools {
    session_id: String,
    cmd: String,
    params: Value,
}

impl WebDriverCompatibleCommand for DevTools {
    fn endpoint(
        &self,
        base_url: &Url,
        _: Option<&str>,
    ) -> Result<Url, <Url as std::str::FromStr>::Err> {
        base_url.join(&format!("session/{}/goog/cdp/execute", self.session_id))
    }

    fn method_and_body(&self, _: &Url) -> (Method, Option<String>) {
        let body = json!({"cmd": self.cmd, "params": self.params});
        (Method::POST, Some(body.to_string()))
    }
}

impl Browser {
    /// Starts chromedriver on a free port of 127.0.0.1 and a headless Chromium session in a
    /// desktop-sized window; `None` (after [`skip_or_fail`]) where either is not installed.
    pub async fn start(test: &str) -> Option<Browser> {
        Self::start_with(test, BrowserOptions::default()).await
    }

    /// [`Browser::start`] with options.
    pub async fn start_with(test: &str, options: BrowserOptions) -> Option<Browser> {
        let (Some(chromium), Some(chromedriver)) =
            (browser_program("chromium"), browser_program("chromedriver"))
        else {
            skip_or_fail(
                test,
                "Chromium or chromedriver is not installed (apt-get install chromium chromium-driver)",
            );
            return None;
        };
        let scratch = tempfile::tempdir().expect("a temp dir for the browser");
        let driver_port = free_port();
        let log = std::fs::File::create(scratch.path().join("chromedriver.log"))
            .expect("chromedriver's log file");
        let driver = Command::new(&chromedriver)
            .arg(format!("--port={driver_port}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("a second handle on the log"))
            .stderr(log)
            // Out of the test's process group, away from a terminal's signals; Chromium
            // starts a session of its own anyway.
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", chromedriver.display()));
        // Owned from here on, so that a panic below still kills it.
        let mut browser = PartialBrowser {
            driver: Some(driver),
            scratch: Some(scratch),
        };
        browser.wait_until_ready(driver_port).await;

        let profile = browser.scratch().join("profile");
        let (width, height) = Viewport::Desktop.size();
        let mut chrome_options = json!({
            "binary": chromium,
            "args": [
                "--headless=new",
                "--no-sandbox",
                "--disable-dev-shm-usage",
                "--disable-gpu",
                "--no-first-run",
                "--hide-scrollbars",
                "--force-device-scale-factor=1",
                "--lang=en-GB",
                format!("--window-size={width},{height}"),
                format!("--user-data-dir={}", profile.display()),
            ],
        });
        if !options.javascript {
            chrome_options["prefs"] =
                json!({"profile.managed_default_content_settings.javascript": 2});
        }
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": chrome_options,
            "timeouts": {"script": 20_000, "pageLoad": 20_000, "implicit": 0},
        });
        let capabilities = capabilities.as_object().cloned().expect("an object");
        let webdriver = format!("http://127.0.0.1:{driver_port}");
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let mut builder = ClientBuilder::new(connector);
        builder.capabilities(capabilities);
        let connecting = builder.connect(&webdriver);
        let client = match tokio::time::timeout(STARTUP_TIMEOUT, connecting).await {
            Ok(Ok(client)) => client,
            Ok(Err(error)) => panic!(
                "no Chromium session: {error:?}\nchromedriver's log:\n{}",
                browser.log()
            ),
            Err(_) => panic!(
                "no Chromium session within {STARTUP_TIMEOUT:?}\nchromedriver's log:\n{}",
                browser.log()
            ),
        };
        let session_id = bounded("reading the session id", client.session_id())
            .await
            .expect("a session id");
        let (driver, scratch) = browser.take();
        let browser = Browser {
            client,
            session_id,
            driver,
            driver_port,
            _scratch: scratch,
        };
        browser.set_viewport(Viewport::Desktop).await;
        Some(browser)
    }

    /// Opens `url` and waits until its document has loaded.
    pub async fn goto(&self, url: &str) {
        // On a busy host chromedriver's navigation can answer before the new page's
        // document is parsed: its source read then is empty (2 reads in 100 with six
        // cores' worth of busy loops on two), so the wait is the same as a click's.
        let before = self.time_origin().await;
        bounded(&format!("opening {url}"), self.client.goto(url)).await;
        self.await_new_document(&before, &format!("opening {url}"))
            .await;
    }

    /// The URL of the page shown now.
    pub async fn current_url(&self) -> Url {
        bounded("reading the URL", self.client.current_url()).await
    }

    /// The path of the page shown now (`/app/sign_in`).
    pub async fn current_path(&self) -> String {
        self.current_url().await.path().to_string()
    }

    /// The HTTP status the page shown now was served with (from the Navigation Timing entry
    /// of its document, which WebDriver does not report otherwise).
    pub async fn status(&self) -> u16 {
        let status = self
            .js(
                "return performance.getEntriesByType('navigation')[0].responseStatus;",
                vec![],
            )
            .await;
        status
            .as_u64()
            .and_then(|s| u16::try_from(s).ok())
            .unwrap_or_else(|| panic!("no response status for the page: {status}"))
    }

    /// Runs `script` in the page (`return` gives its result).
    pub async fn js(&self, script: &str, args: Vec<Value>) -> Value {
        bounded("running a script", self.client.execute(script, args)).await
    }

    /// The value of JavaScript `expression` once the page shown now has rendered two more
    /// frames: what layout and page scale settle to, which on a busy host can still be
    /// changing when the load event has fired. A page that renders no frame (one the
    /// browser deems hidden) is measured after a second instead.
    pub async fn js_after_frames(&self, expression: &str) -> Value {
        let script = format!(
            "const done = arguments[arguments.length - 1]; \
             let answered = false; \
             const answer = () => {{ if (!answered) {{ answered = true; done({expression}); }} }}; \
             requestAnimationFrame(() => requestAnimationFrame(answer)); \
             setTimeout(answer, 1000);"
        );
        bounded(
            "running a script after two frames",
            self.client.execute_async(&script, vec![]),
        )
        .await
    }

    /// The first element `selector` finds; panics with the page's source if there is none.
    pub async fn find(&self, selector: &str) -> fantoccini::elements::Element {
        match tokio::time::timeout(COMMAND_TIMEOUT, self.client.find(Locator::Css(selector))).await
        {
            Ok(Ok(element)) => element,
            Ok(Err(error)) => panic!(
                "no element {selector:?} on {} ({error}); the page:\n{}",
                self.current_url().await,
                self.source().await
            ),
            Err(_) => panic!("finding {selector:?} took longer than {COMMAND_TIMEOUT:?}"),
        }
    }

    /// How many elements `selector` finds.
    pub async fn count(&self, selector: &str) -> usize {
        bounded(
            &format!("finding {selector:?}"),
            self.client.find_all(Locator::Css(selector)),
        )
        .await
        .len()
    }

    /// The page's HTML as the browser holds it now.
    pub async fn source(&self) -> String {
        bounded("reading the page source", self.client.source()).await
    }

    /// The text the user sees in the first element `selector` finds.
    pub async fn text(&self, selector: &str) -> String {
        let element = self.find(selector).await;
        bounded(&format!("reading the text of {selector:?}"), element.text()).await
    }

    /// Attribute `name` of every element `selector` finds, in document order (`None` where
    /// one has no such attribute).
    pub async fn attributes(&self, selector: &str, name: &str) -> Vec<Option<String>> {
        let values = self
            .js(
                "return Array.from(document.querySelectorAll(arguments[0]), \
                 e => e.getAttribute(arguments[1]));",
                vec![json!(selector), json!(name)],
            )
            .await;
        serde_json::from_value(values).expect("a list of attribute values")
    }

    /// Types `text` into the first field `selector` finds (after clearing it).
    pub async fn fill(&self, selector: &str, text: &str) {
        let field = self.find(selector).await;
        bounded(&format!("clearing {selector:?}"), field.clear()).await;
        bounded(&format!("typing into {selector:?}"), field.send_keys(text)).await;
    }

    /// Clicks the first element `selector` finds (a link, a form's button) and waits until
    /// the page it leads to has loaded.
    pub async fn click(&self, selector: &str) {
        let before = self.time_origin().await;
        let element = self.find(selector).await;
        bounded(&format!("clicking {selector:?}"), element.click()).await;
        self.await_new_document(&before, &format!("clicking {selector:?}"))
            .await;
    }

    /// The time origin of the document shown now, which each document has anew (null where
    /// no script can run, as on a browser's own error page).
    async fn time_origin(&self) -> Value {
        let origin = "return performance.timeOrigin;";
        let asked = tokio::time::timeout(COMMAND_TIMEOUT, self.client.execute(origin, vec![]));
        asked.await.ok().and_then(Result::ok).unwrap_or(Value::Null)
    }

    /// Waits until a document other than the one whose time origin was `before` is shown
    /// and has loaded: chromedriver does not always wait for the navigation a click starts,
    /// nor, on a busy host, for the whole of one it was asked for.
    async fn await_new_document(&self, before: &Value, after: &str) {
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        let state = "return [performance.timeOrigin, document.readyState];";
        loop {
            // A script sent while one document gives way to the next can fail (its context
            // is gone); that is the navigation under way, so it is asked again.
            let now = tokio::time::timeout(COMMAND_TIMEOUT, self.client.execute(state, vec![]));
            let seen = match now.await {
                Ok(Ok(now)) if &now[0] != before && now[1] == "complete" => return,
                Ok(Ok(now)) => format!("{now}"),
                Ok(Err(error)) => format!("{error:?}"),
                Err(_) => format!("no answer within {COMMAND_TIMEOUT:?}"),
            };
            assert!(
                Instant::now() < deadline,
                "no new page loaded within {COMMAND_TIMEOUT:?} of {after} (last seen: {seen})"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// A cookie the browser holds for the page shown now, by name.
    pub async fn cookie(&self, name: &str) -> Option<fantoccini::cookies::Cookie<'static>> {
        let all = bounded("reading the cookies", self.client.get_all_cookies()).await;
        all.into_iter().find(|cookie| cookie.name() == name)
    }

    /// Sets a cookie for the site of the page shown now.
    pub async fn add_cookie(&self, cookie: fantoccini::cookies::Cookie<'static>) {
        bounded("adding a cookie", self.client.add_cookie(cookie)).await;
    }

    /// Sends a DevTools protocol command to the page and returns its result.
    pub async fn devtools(&self, cmd: &str, params: Value) -> Value {
        let command = DevTools {
            session_id: self.session_id.clone(),
            cmd: cmd.to_string(),
            params,
        };
        bounded(&format!("DevTools {cmd}"), self.client.issue_cmd(command)).await
    }

    /// Lays pages out in `viewport`: its exact size in CSS pixels at a device scale factor
    /// of 1 (the window's size would include whatever the window manager takes), as a
    /// touch-screen phone with `<meta name="viewport">` honoured for [`Viewport::Phone`].
    pub async fn set_viewport(&self, viewport: Viewport) {
        let (width, height) = viewport.size();
        self.devtools(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1,
                   "mobile": viewport == Viewport::Phone}),
        )
        .await;
    }

    /// Lays pages out for `print` or back for the screen (`media: None`).
    pub async fn emulate_media(&self, media: Option<&str>) {
        self.devtools(
            "Emulation.setEmulatedMedia",
            json!({"media": media.unwrap_or("")}),
        )
        .await;
    }

    /// A PNG of the viewport.
    pub async fn screenshot(&self) -> Vec<u8> {
        bounded("taking a screenshot", self.client.screenshot()).await
    }

    /// Writes a PNG of the viewport to `path`.
    pub async fn screenshot_to(&self, path: &Path) {
        let png = self.screenshot().await;
        std::fs::write(path, png).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    }

    /// The page printed to PDF as Chromium prints it (Page.printToPDF): on A4 unless the
    /// page's CSS says otherwise, with the page's backgrounds, without headers and footers.
    pub async fn print_to_pdf(&self) -> Vec<u8> {
        let printed = self
            .devtools(
                "Page.printToPDF",
                json!({"paperWidth": 8.27, "paperHeight": 11.69, "preferCSSPageSize": true,
                       "printBackground": true, "displayHeaderFooter": false}),
            )
            .await;
        let data = printed["data"]
            .as_str()
            .unwrap_or_else(|| panic!("Page.printToPDF answered no data: {printed}"));
        base64::engine::general_purpose::STANDARD
            .decode(data)
            .expect("Page.printToPDF's data is base64")
    }

    /// Runs axe-core (its source, from [`axe_core_source`]) on the page shown now: the
    /// violations it finds, each with its rule id, impact, help text and the elements.
    pub async fn axe_violations(&self, axe_source: &str) -> Vec<Value> {
        // The source defines `window.axe`; injected on every call since a navigation drops it.
        self.js(&format!("{axe_source}\n;return typeof window.axe;"), vec![])
            .await;
        let run = "const done = arguments[arguments.length - 1];\
            window.axe.run(document, {resultTypes: ['violations']})\
              .then(r => done(r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,\
                  nodes: v.nodes.map(n => ({target: n.target.join(' '), html: n.html,\
                                            summary: n.failureSummary}))}))))\
              .catch(e => done({error: String(e)}));";
        let result = bounded("running axe-core", self.client.execute_async(run, vec![])).await;
        match result {
            Value::Array(violations) => violations,
            other => panic!("axe-core failed on {}: {other}", self.current_url().await),
        }
    }

    /// Fails the test, listing them, if axe-core finds violations of impact `serious` or
    /// `critical` on the page shown now (`what` names the page in the message); returns the
    /// lesser ones.
    pub async fn assert_accessible(&self, axe_source: &str, what: &str) -> Vec<Value> {
        let violations = self.axe_violations(axe_source).await;
        let (grave, lesser): (Vec<Value>, Vec<Value>) = violations
            .into_iter()
            .partition(|v| matches!(v["impact"].as_str(), Some("serious" | "critical")));
        assert!(
            grave.is_empty(),
            "axe-core finds serious or critical violations on {what} ({}):\n{}",
            self.current_url().await,
            serde_json::to_string_pretty(&grave).unwrap()
        );
        lesser
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // fantoccini ends the session from a task of the runtime when its client is dropped,
        // but a test's runtime may be shutting down and never run it: end it here, with a
        // blocking request (chromedriver then quits Chromium), before killing what is left.
        end_session(self.driver_port, &self.session_id);
        stop(&mut self.driver, self._scratch.path());
    }
}

/// `DELETE /session/{id}` to the chromedriver on `port`, waiting at most [`QUIT_TIMEOUT`] for
/// its answer (chromedriver answers once Chromium has quit); failures are ignored, since
/// whatever is left is killed next anyway.
fn end_session(port: u16, session_id: &str) {
    let Ok(mut stream) =
        TcpStream::connect_timeout(&(Ipv4Addr::LOCALHOST, port).into(), Duration::from_secs(2))
    else {
        return;
    };
    let _ = stream.set_write_timeout(Some(QUIT_TIMEOUT));
    let request = format!(
        "DELETE /session/{session_id} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
         Content-Length: 0\r\nConnection: close\r\n\r\n"
    );
    if stream.write_all(request.as_bytes()).is_err() {
        return;
    }
    // The answer's head is enough: chromedriver keeps the connection open after its
    // answer, so reading to the end would wait for the whole timeout.
    let deadline = Instant::now() + QUIT_TIMEOUT;
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => answer.extend_from_slice(&chunk[..n]),
        }
    }
}

/// Kills and reaps chromedriver, then kills every process still running with the Chromium
/// profile in `scratch` (none, after a session that ended well). Chromium's processes are
/// found by that profile, which is this browser's alone, since Chromium puts itself in a
/// session of its own, out of chromedriver's process group, and is no child of the test's.
fn stop(driver: &mut Child, scratch: &Path) {
    let _ = driver.kill();
    let _ = driver.wait();
    let flag = format!("--user-data-dir={}", scratch.join("profile").display());
    let Ok(processes) = std::fs::read_dir("/proc") else {
        return;
    };
    for process in processes.flatten() {
        let Some(pid) = process.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let Ok(command_line) = std::fs::read(process.path().join("cmdline")) else {
            continue;
        };
        if command_line
            .split(|&b| b == 0)
            .any(|arg| arg == flag.as_bytes())
        {
            let pid = nix::unistd::Pid::from_raw(pid);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        }
    }
}

/// chromedriver and its scratch directory before a session exists: killed and reaped if the
/// start fails half-way.
struct PartialBrowser {
    driver: Option<Child>,
    scratch: Option<TempDir>,
}

impl PartialBrowser {
    fn scratch(&self) -> &Path {
        self.scratch.as_ref().expect("the scratch dir").path()
    }

    /// chromedriver's log so far, for failure messages.
    fn log(&self) -> String {
        std::fs::read_to_string(self.scratch().join("chromedriver.log")).unwrap_or_default()
    }

    /// Polls chromedriver's `/status` until it says it is ready, for at most
    /// [`STARTUP_TIMEOUT`].
    async fn wait_until_ready(&mut self, port: u16) {
        let client = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(2))
            .build()
            .expect("an HTTP client");
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            let driver = self.driver.as_mut().expect("chromedriver");
            if let Ok(Some(status)) = driver.try_wait() {
                panic!("chromedriver exited ({status}):\n{}", self.log());
            }
            let status = client
                .get(format!("http://127.0.0.1:{port}/status"))
                .send()
                .await;
            if let Ok(response) = status {
                if let Ok(body) = response.json::<Value>().await {
                    if body["value"]["ready"] == true {
                        return;
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "chromedriver was not ready within {STARTUP_TIMEOUT:?}:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn take(&mut self) -> (Child, TempDir) {
        (
            self.driver.take().expect("chromedriver"),
            self.scratch.take().expect("the scratch dir"),
        )
    }
}

impl Drop for PartialBrowser {
    fn drop(&mut self) {
        if let (Some(mut driver), Some(scratch)) = (self.driver.take(), self.scratch.as_ref()) {
            stop(&mut driver, scratch.path());
        }
    }
}

/// axe-core's `axe.min.js` source: from [`AXE_JS`], else `target/axe-core/axe.min.js`
/// (`.ci/axe-core` fetches it there); `None` (after [`skip_or_fail`]) where it is missing.
pub fn axe_core_source(test: &str) -> Option<String> {
    let path = std::env::var_os(AXE_JS)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("target/axe-core/axe.min.js")
        });
    match std::fs::read_to_string(&path) {
        Ok(source) => Some(source),
        Err(error) => {
            skip_or_fail(
                test,
                &format!(
                    "axe-core is not at {} ({error}): run .ci/axe-core to fetch it, or set {AXE_JS}",
                    path.display()
                ),
            );
            None
        }
    }
}
