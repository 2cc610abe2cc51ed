//! The customer actor: sole owner of one customer, its orders and its account (whose
//! postings are in `account`). Each message runs one domain
//! rule and writes the change to the store. A customer update waits until the write is
//! durable, publishes the customer, and only then replies (a write given up puts the customer
//! back). An order's create and change have one shape ([`OrderWrite`]): validate, write, and
//! answer at once with the wait for the disk; group commit publishes the order to the
//! indexes and releases what its request held once it is on disk, so the actor is not woken a
//! second time per order and goes on with the next message meanwhile (the log keeps its
//! writes in order). Anything answered from the actor's own list of orders waits for the
//! writes it holds that are not on disk yet, so nothing a crash or a give-up could take back
//! is ever shown (and the registry's read of one order waits for them too). An order write is
//! given up only when the log fails, which stops the node, or when a group's primary learns
//! it was deposed, which stops every actor and rebuilds the store: no actor answers from a
//! memory the log does not hold. Failures go back inside the reply (`Result` in the `RpcReplyPort`), because
//! an `Err` returned from `handle` would stop the actor.
//!
//! A request comes with a [`Handoff`] shared with its caller, so that a request whose caller
//! has gone is dropped unstarted, and whatever the caller holds for it is released when the
//! actor is done with it (for an order, once the order is on disk).
//!
//! Must not touch: HTTP status codes, the registry's maps (the registry activates and
//! passivates actors; the actor writes its own records and their index entries), or blocking
//! work such as password hashing.

mod account;
mod deliveries;

pub use account::{AccountChange, AccountPosted, ChangeAccount};
pub use deliveries::{DeliveryMarked, MarkDelivery, NOT_A_DELIVERY};

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use prometheus::IntCounter;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use crate::clock::unix_now;
use crate::domain::account::settings::AccountSettings;
use crate::domain::account::Account;
use crate::domain::catalogue::{CurrentCatalogue, DeliveryService, Webstore};
use crate::domain::customer::{Customer, CustomerChanges};
use crate::domain::day::Day;
use crate::domain::day::WeekDays;
use crate::domain::fields::FieldErrors;
use crate::domain::idempotency::Pending;
use crate::domain::ids::OrderId;
use crate::domain::order::body::{validate_order, CustomerCheck, OrderBody};
use crate::domain::order::change::{ChangeContext, OrderChange};
use crate::domain::order::schedule::ScheduleRules;
use crate::domain::order::Order;
use crate::store::order_ids::OrderIds;
use crate::store::{IdempotencyWrite, OnDurable, Store, StoreError, Written};

use crate::events::sequence::InFlight;
use crate::events::Events;
use crate::index::Indexes;
use crate::metrics::METRICS;

/// The customer as last durably stored, published by its actor so that reads need no
/// message round trip. Only the actor writes it, after each change is on disk.
pub type Published = Arc<std::sync::RwLock<Arc<Customer>>>;

/// How many of a customer's order writes are not on disk yet (see `OnDisk`): shared with
/// the registry, which makes a read of one of its orders wait for them, and never passivates
/// the actor while there are any.
pub type OrdersWriting = Arc<AtomicUsize>;

/// The actor's behaviour; its state lives in [`CustomerState`].
pub struct CustomerActor;

/// What a customer actor starts from: its snapshot.
pub struct CustomerArgs {
    /// The customer.
    pub customer: Customer,
    /// Its orders, by id.
    pub orders: Vec<Order>,
    /// The customer's webstore, whose catalogue orders are checked against.
    pub webstore: Arc<Webstore>,
    /// The catalogue in force, from which the webstore is refreshed after a reload.
    pub catalogue: Arc<CurrentCatalogue>,
    /// Where order ids come from (shared by all customers).
    pub order_ids: Arc<OrderIds>,
    /// Where the snapshot is written.
    pub store: Store,
    /// Where the current customer is published for readers.
    pub published: Published,
    /// Where the actor counts its order writes not on disk yet.
    pub writing: OrdersWriting,
    /// Where durable orders are published for readers (shared by all customers).
    pub indexes: Arc<Indexes>,
    /// Where each change's event comes from (shared by all customers).
    pub events: Arc<Events>,
}

/// The customer and its orders, owned by the actor alone.
pub struct CustomerState {
    customer: Arc<Customer>,
    orders: Vec<Arc<Order>>,
    webstore: Arc<Webstore>,
    catalogue: Arc<CurrentCatalogue>,
    order_ids: Arc<OrderIds>,
    store: Store,
    published: Published,
    indexes: Arc<Indexes>,
    events: Arc<Events>,
    /// Orders written and not yet on disk (see [`OnDisk`]).
    writing: OrdersWriting,
    /// The webstore's count of created orders, once this actor has created one (looking
    /// the label up hashes it and takes the metric family's lock).
    orders_created: Option<IntCounter>,
}

/// How a durable order is published to the indexes.
#[derive(Debug, Clone, Copy)]
enum Publish {
    /// A new order: found by id and on its dates from now on, and counted.
    Created,
    /// A changed order: its entries replaced.
    Changed,
}

/// Counts an order among those written and not yet on disk until dropped, which group
/// commit does once the order is on disk (or never will be).
struct OnDisk(Arc<AtomicUsize>);

impl OnDisk {
    fn count(writing: &Arc<AtomicUsize>) -> OnDisk {
        writing.fetch_add(1, Ordering::AcqRel);
        OnDisk(writing.clone())
    }
}

impl Drop for OnDisk {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A customer's orders as its actor holds them.
pub struct OrderList {
    /// The orders, by id.
    pub orders: Vec<Arc<Order>>,
    /// While some of them are still on their way to disk: completes once they are there.
    /// Answer only then, so that no one reads an order that a crash could still take away.
    pub durable: Option<Written>,
}

/// Why a change was not made.
#[derive(Debug, thiserror::Error)]
pub enum ChangeError {
    /// The change broke a domain rule.
    #[error("validation failed: {0}")]
    Invalid(FieldErrors),
    /// The change could not be stored; nothing changed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The customer has no order with this id.
    #[error("no such order")]
    NoSuchOrder,
    /// The customer has no payment with this id.
    #[error("no such payment")]
    NoSuchPayment,
}

/// A customer after an update, with the customer before it.
#[derive(Debug, Clone)]
pub struct Updated {
    /// The customer now.
    pub customer: Arc<Customer>,
    /// The customer before the update.
    pub previous: Arc<Customer>,
}

/// An order to validate and store, with its idempotency key if it came with one.
pub struct PlaceOrder {
    /// The order body, unwrapped from `{"order": …}`.
    pub body: OrderBody,
    /// The key and the response to record with the order.
    pub idempotency: Option<Pending<Order>>,
}

/// An order's create or change, as the actor answers it: the order as it is now, and the wait
/// before it may be shown.
pub struct OrderWrite {
    /// The order after the write (as it was, for a change that changes nothing).
    pub order: Arc<Order>,
    /// What the answer waits for: the write's durability, after which the order is published
    /// for readers and what its request held is released; `Unchanged` when nothing was
    /// written (then, while earlier writes of the customer are not on disk yet, the wait
    /// for them, since the order shown may hold one).
    pub durable: Durable,
}

impl OrderWrite {
    /// Whether the order was written (not a change that changed nothing).
    pub fn wrote(&self) -> bool {
        matches!(self.durable, Durable::Written(_))
    }
}

/// What an [`OrderWrite`] waits for.
pub enum Durable {
    /// The write: answer its client as having made it once this completes.
    Written(Written),
    /// Nothing was written; the earlier writes the order shown may hold, if any are not on
    /// disk yet.
    Unchanged(Option<Written>),
}

/// A change of one of the customer's orders, with its idempotency key if it came with one.
pub struct ChangeOrder {
    /// The order.
    pub order: OrderId,
    /// The change, parsed from `{"order": …}`.
    pub change: OrderChange,
    /// The key and the response to record with the change.
    pub idempotency: Option<Pending<Order>>,
}

/// What a customer actor is asked to do.
pub enum Request {
    /// Apply changes already checked field by field (and with the password hashed).
    Update(
        Box<CustomerChanges>,
        RpcReplyPort<Result<Updated, ChangeError>>,
    ),
    /// Validate an order against the catalogue and store it; answered once it is written,
    /// with the wait for it to be on disk.
    PlaceOrder(
        Box<PlaceOrder>,
        RpcReplyPort<Result<OrderWrite, ChangeError>>,
    ),
    /// All of this customer's orders by id.
    ListOrders(RpcReplyPort<Result<OrderList, ChangeError>>),
    /// Change one of its orders (its history gains the change's versions); answered as a
    /// create is, once written, with the wait for it to be on disk.
    ChangeOrder(
        Box<ChangeOrder>,
        RpcReplyPort<Result<OrderWrite, ChangeError>>,
    ),
    /// Post a payment, a reversal or an adjustment to the customer's account; answered once
    /// it is on disk.
    ChangeAccount(
        Box<ChangeAccount>,
        RpcReplyPort<Result<AccountPosted, ChangeError>>,
    ),
    /// Mark one of its frozen deliveries delivered (charged) or not; answered once it is on
    /// disk.
    MarkDelivery(
        Box<MarkDelivery>,
        RpcReplyPort<Result<DeliveryMarked, ChangeError>>,
    ),
    /// Set the account's discount and spend limit; answered once it is on disk.
    SetAccount(AccountSettings, RpcReplyPort<Result<Account, ChangeError>>),
}

/// A request as it travels to the actor: what to do, the handoff it shares with its caller,
/// and the caller's permits, which count the request against the service's limits until the
/// actor is done with the message, whether or not the caller still waits.
pub struct CustomerMsg {
    /// What to do.
    pub request: Request,
    /// Shared with the caller: see [`Handoff`].
    pub handoff: Arc<Handoff>,
    /// Released (by its `Drop`) once the actor has finished with the message, or for an
    /// order once it is on disk.
    pub permits: Box<dyn Send>,
}

/// Whether a request is still wanted, decided once between its caller and the actor: either
/// the actor starts it, or the caller withdraws it (its client went away, or it stopped
/// waiting); never both. So a request whose caller gave up before it began changes nothing,
/// and one that began is finished and its outcome stands.
///
/// It also keeps what the request's change needs to itself (an email claim, an idempotency
/// key's turn): released at once when the request is withdrawn, since the change will not
/// happen, or else once the actor has finished it, since until then it may.
///
/// And it says whether the actor has begun writing the request's change (handed it to the
/// store, before any wait for the disk), so that a caller that stops waiting, or hears of a
/// failure, knows whether the change may be stored.
pub struct Handoff {
    state: AtomicU8,
    exclusive: Mutex<Option<Box<dyn Send>>>,
    wrote: AtomicBool,
}

/// What a started request's change needs to itself; released when dropped.
pub type Exclusive = Option<Box<dyn Send>>;

const QUEUED: u8 = 0;
const STARTED: u8 = 1;
const WITHDRAWN: u8 = 2;

impl Handoff {
    /// A request not yet started, holding `exclusive` for its change.
    pub fn new(exclusive: Exclusive) -> Handoff {
        Handoff {
            state: AtomicU8::new(QUEUED),
            exclusive: Mutex::new(exclusive),
            wrote: AtomicBool::new(false),
        }
    }

    /// The actor has handed the request's change to the store.
    fn began_writing(&self) {
        self.wrote.store(true, Ordering::Release);
    }

    /// Whether the actor has handed the request's change to the store (it may or may not be
    /// durable yet).
    pub fn has_written(&self) -> bool {
        self.wrote.load(Ordering::Acquire)
    }

    /// The actor takes the request: `None` if the caller withdrew it first, else what its
    /// change needs to itself, to hold until the change is done.
    pub fn start(&self) -> Option<Exclusive> {
        self.state
            .compare_exchange(QUEUED, STARTED, Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .map(|_| self.take_exclusive())
    }

    /// The caller gives the request up: true unless the actor already started it. A
    /// withdrawn request's exclusive holdings are released at once.
    pub fn withdraw(&self) -> bool {
        match self
            .state
            .compare_exchange(QUEUED, WITHDRAWN, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => {
                drop(self.take_exclusive());
                true
            }
            Err(state) => state == WITHDRAWN,
        }
    }

    fn take_exclusive(&self) -> Exclusive {
        self.exclusive
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take()
    }
}

impl Actor for CustomerActor {
    type Msg = CustomerMsg;
    type State = CustomerState;
    type Arguments = CustomerArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: CustomerArgs,
    ) -> Result<CustomerState, ActorProcessingErr> {
        let mut orders: Vec<Arc<Order>> = args.orders.into_iter().map(Arc::new).collect();
        orders.sort_by_key(|order| order.id);
        Ok(CustomerState {
            customer: Arc::new(args.customer),
            orders,
            webstore: args.webstore,
            catalogue: args.catalogue,
            order_ids: args.order_ids,
            store: args.store,
            published: args.published,
            indexes: args.indexes,
            events: args.events,
            writing: args.writing,
            orders_created: None,
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: CustomerMsg,
        state: &mut CustomerState,
    ) -> Result<(), ActorProcessingErr> {
        let CustomerMsg {
            request,
            handoff,
            permits,
        } = message;
        let Some(exclusive) = handoff.start() else {
            // The caller went away before this began: drop it, changing nothing.
            return Ok(());
        };
        state.refresh_webstore();
        let held = (exclusive, permits);
        // A failed `send` means the caller stopped waiting after this began; the change
        // stands either way.
        // The update that waits for the disk is boxed: ractor moves each message's handling
        // future whole into its loop, and it would make every message's (an order's too) as
        // large as its own.
        match request {
            Request::Update(changes, reply) => {
                let _ = reply.send(Box::pin(state.update(&changes, &handoff)).await);
                drop(held);
            }
            // A written order's request holds its permits and idempotency turn until the
            // order is on disk; the actor goes on with its next message meanwhile.
            Request::PlaceOrder(order, reply) => {
                let written = state.place_order(*order, Box::new(held));
                if written.as_ref().is_ok_and(OrderWrite::wrote) {
                    handoff.began_writing();
                }
                let _ = reply.send(written);
            }
            Request::ChangeOrder(change, reply) => {
                let written = state.change_order(*change, Box::new(held));
                if written.as_ref().is_ok_and(OrderWrite::wrote) {
                    handoff.began_writing();
                }
                let _ = reply.send(written);
            }
            Request::ListOrders(reply) => {
                let _ = reply.send(state.list_orders());
                drop(held);
            }
            Request::ChangeAccount(change, reply) => {
                let _ = reply.send(Box::pin(state.change_account(*change, &handoff)).await);
                drop(held);
            }
            Request::MarkDelivery(mark, reply) => {
                let _ = reply.send(Box::pin(state.mark_delivery(*mark, &handoff)).await);
                drop(held);
            }
            Request::SetAccount(settings, reply) => {
                let _ = reply.send(Box::pin(state.set_account(settings, &handoff)).await);
                drop(held);
            }
        }
        Ok(())
    }
}

impl CustomerState {
    /// The orders, with a wait for those not yet on disk if there are any.
    fn list_orders(&self) -> Result<OrderList, ChangeError> {
        Ok(OrderList {
            orders: self.orders.clone(),
            durable: self.in_flight()?,
        })
    }

    /// A wait for the order writes of this customer not on disk yet, if there are any:
    /// whatever is answered from the actor's list waits for it.
    fn in_flight(&self) -> Result<Option<Written>, ChangeError> {
        // Zero means every order written before has had its `OnDurable` run or dropped.
        Ok(match self.writing.load(Ordering::Acquire) {
            0 => None,
            _ => Some(self.store.barrier()?),
        })
    }

    async fn update(
        &mut self,
        changes: &CustomerChanges,
        handoff: &Handoff,
    ) -> Result<Updated, ChangeError> {
        let mut next = self
            .customer
            .updated(changes, &self.webstore.settings.require, self.open_day())
            .map_err(ChangeError::Invalid)?;
        // The halts only frozen dates needed go: those dates are answered from their lists.
        if let Some((since, before)) = self.indexes.frozen.foldable(self.webstore.idx) {
            if next.halts != self.customer.halts {
                next.halts = next.halts.folded(since, before);
            }
        }
        let next = Arc::new(next);
        // A halt by hand set or lifted: the account remembers which halt is whose.
        let account = match next.account.halted_by_hand != self.customer.account.halted_by_hand {
            true => Some(
                self.store
                    .account_write(&next.account, &self.webstore.settings.id)?,
            ),
            false => None,
        };
        let event = self.events.customer_updated(&self.webstore, &next)?;
        // The event's number stays unsettled until the change is durable (or given up: then
        // for good), even should this future be dropped before then.
        let written = event.written(|event, on_durable| {
            self.store.update_customer(
                &next,
                &self.customer,
                &self.webstore.settings.id,
                Some(event),
                account,
                on_durable,
            )
        })?;
        handoff.began_writing();
        let previous = std::mem::replace(&mut self.customer, next.clone());
        if let Err(error) = written.durable().await {
            // Given up: the customer is as it was, for whatever this actor does next.
            self.customer = previous;
            return Err(error.into());
        }
        *self
            .published
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = next.clone();
        if next.delivery_service_id != previous.delivery_service_id || next.halts != previous.halts
        {
            // The delivery lists order and filter by delivery service, and leave out the
            // orders of a halted customer.
            self.indexes.customer_moved(self.webstore.idx);
        }
        Ok(Updated {
            customer: next,
            previous,
        })
    }

    /// Changes one of the customer's orders, and hands back the wait for the change to be on
    /// disk, as [`CustomerState::place_order`] does: group commit publishes the changed order
    /// to the indexes and releases `held` once it is on disk. A change that changes nothing
    /// writes nothing, and releases `held` at once.
    fn change_order(
        &mut self,
        request: ChangeOrder,
        held: Box<dyn Send>,
    ) -> Result<OrderWrite, ChangeError> {
        let at = self
            .orders
            .binary_search_by_key(&request.order, |order| order.id)
            .map_err(|_| ChangeError::NoSuchOrder)?;
        let order = self.orders[at].clone();
        let now = unix_now();
        let context = ChangeContext {
            webstore: &self.webstore,
            delivery_days: self.schedule_rules().delivery_days,
            now,
        };
        let history = request
            .change
            .apply(&order.history, &context)
            .map_err(ChangeError::Invalid)?;
        if history == order.history {
            return Ok(OrderWrite {
                durable: Durable::Unchanged(self.in_flight()?),
                order,
            });
        }
        // What only frozen dates needed goes: they are answered from their lists.
        let history = match self.indexes.frozen.foldable(self.webstore.idx) {
            Some((since, before)) => history.folded(since, before, &self.customer.halts),
            None => history,
        };
        let next = Arc::new(order.changed(history));
        let idempotency = request.idempotency.map(|pending| {
            IdempotencyWrite::rendered(&self.webstore.settings.id, pending, &*next, now)
        });
        let event = self.events.order_updated(&self.webstore, &next)?;
        let publish = self.publish_when_durable(next.clone(), Publish::Changed, held);
        let durable = event.written_with(publish, |event, on_durable| {
            self.store.update_order(
                &next,
                &self.webstore.settings.id,
                idempotency,
                Some(event),
                on_durable,
            )
        })?;
        // The next change builds on this one: the log keeps their writes in order.
        self.orders[at] = next.clone();
        Ok(OrderWrite {
            order: next,
            durable: Durable::Written(durable),
        })
    }

    /// Takes the webstore as the catalogue in force has it (the operator may have reloaded
    /// the catalogue since the last message).
    fn refresh_webstore(&mut self) {
        if let Some(current) = self.catalogue.webstore(self.webstore.idx) {
            if !Arc::ptr_eq(&current, &self.webstore) {
                self.webstore = current;
                self.orders_created = None;
            }
        }
    }

    /// The first date not locked for packing now: the first a change can take effect on.
    fn open_day(&self) -> Day {
        self.webstore
            .cutoff
            .first_open_day(&self.webstore.zone, unix_now())
    }

    /// What an order's schedule is checked against: the customer's delivery service's days
    /// (none if the catalogue no longer has it) and today in the webstore's time zone.
    fn schedule_rules(&self) -> ScheduleRules {
        let delivery_days = self
            .webstore
            .delivery_services
            .get(&self.customer.delivery_service_id)
            .map_or(WeekDays::NONE, DeliveryService::week_days);
        ScheduleRules {
            delivery_days,
            today: self.webstore.today(unix_now()),
        }
    }

    /// Validates and writes an order, and hands back the wait for it to be on disk. Group
    /// commit publishes it for readers, counts it, and releases `held` once it is on disk
    /// (see [`OnDurable`]), so this actor is not woken for that. `held` is released at once
    /// if the order is refused.
    fn place_order(
        &mut self,
        request: PlaceOrder,
        held: Box<dyn Send>,
    ) -> Result<OrderWrite, ChangeError> {
        let mut rules = self.schedule_rules();
        if !request.body.has_start_date() {
            // A new order without a start date starts at the first delivery date after the
            // cut-off: the first one its producer has not packed for yet.
            rules.today = rules.today.max(self.open_day().plus(-1));
        }
        let content = validate_order(&request.body, &self.webstore, CustomerCheck::Found(rules))
            .map_err(ChangeError::Invalid)?;
        let order = Arc::new(Order::new(
            OrderId(self.order_ids.take()?),
            self.customer.id,
            content,
            unix_now(),
        ));
        let idempotency = request.idempotency.map(|pending| {
            IdempotencyWrite::rendered(
                &self.webstore.settings.id,
                pending,
                &*order,
                order.created_at,
            )
        });
        let event = self.events.order_created(&self.webstore, &order)?;
        let publish = self.publish_when_durable(order.clone(), Publish::Created, held);
        let durable = event.written_with(publish, |event, on_durable| {
            self.store.create_order(
                &order,
                &self.webstore.settings.id,
                idempotency,
                Some(event),
                on_durable,
            )
        })?;
        // The sequence only grows and this actor takes its ids one message at a time, so
        // pushing keeps the list sorted by id.
        self.orders.push(order.clone());
        Ok(OrderWrite {
            order,
            durable: Durable::Written(durable),
        })
    }

    /// What is to happen once `order` is on disk, given its event's mark: readers find it by
    /// id and on its delivery dates (a new one counted), its event's number settles, and
    /// `held` is released.
    fn publish_when_durable(
        &mut self,
        order: Arc<Order>,
        publish: Publish,
        held: Box<dyn Send>,
    ) -> impl FnOnce(InFlight) -> OnDurable {
        let indexes = self.indexes.clone();
        let webstore = &self.webstore;
        let created = self
            .orders_created
            .get_or_insert_with(|| {
                METRICS
                    .orders_created
                    .with_label_values(&[webstore.settings.id.as_str()])
            })
            .clone();
        let webstore = webstore.idx;
        let on_disk = OnDisk::count(&self.writing);
        move |event: InFlight| -> OnDurable {
            Box::new(move || {
                // Published before the idempotency turn in `held` is released: the next
                // request with the key finds the order its record names, rather than take the
                // record for a stale one and create the order again.
                match publish {
                    Publish::Created => {
                        indexes.publish(webstore, &order);
                        created.inc();
                    }
                    Publish::Changed => indexes.order_changed(webstore, &order),
                }
                event.durable();
                drop((held, on_disk));
            })
        }
    }
}
