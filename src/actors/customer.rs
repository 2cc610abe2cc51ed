//! The customer actor: sole owner of one customer and its orders. Each message runs one domain
//! rule and replies; domain failures go back inside the reply (`Result` in the `RpcReplyPort`),
//! because an `Err` returned from `handle` would stop the actor.
//!
//! Must not touch: HTTP status codes, the registry's maps (the caller updates indexes from the
//! reply), or blocking work such as password hashing.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde_json::{Map, Value};

use crate::domain::catalogue::Webstore;
use crate::domain::customer::{Customer, CustomerChanges};
use crate::domain::fields::FieldErrors;
use crate::domain::ids::{IdSequence, OrderId};
use crate::domain::order::{validate_order, CustomerCheck, Order};

/// The actor's behaviour; its state lives in [`CustomerState`].
pub struct CustomerActor;

/// What a customer actor starts from: a new customer, or (later) one restored from storage.
pub struct CustomerArgs {
    /// The customer.
    pub customer: Customer,
    /// Its orders, by id.
    pub orders: Vec<Order>,
    /// The customer's webstore, whose catalogue orders are checked against.
    pub webstore: Arc<Webstore>,
    /// Where order ids come from (shared by all customers).
    pub order_ids: Arc<IdSequence>,
}

/// The customer and its orders, owned by the actor alone.
pub struct CustomerState {
    customer: Arc<Customer>,
    orders: Vec<Arc<Order>>,
    webstore: Arc<Webstore>,
    order_ids: Arc<IdSequence>,
}

/// A customer after an update, with the customer before it so that the caller can move the
/// email index from the old address to the new one.
#[derive(Debug, Clone)]
pub struct Updated {
    /// The customer now.
    pub customer: Arc<Customer>,
    /// The customer before the update.
    pub previous: Arc<Customer>,
}

/// The requests a customer actor answers.
pub enum CustomerMsg {
    /// The customer as it is now.
    Get(RpcReplyPort<Arc<Customer>>),
    /// Apply changes already checked field by field (and with the password hashed).
    Update(
        Box<CustomerChanges>,
        RpcReplyPort<Result<Updated, FieldErrors>>,
    ),
    /// Validate an order body against the catalogue and store it.
    PlaceOrder(
        Map<String, Value>,
        RpcReplyPort<Result<Arc<Order>, FieldErrors>>,
    ),
    /// One of this customer's orders.
    GetOrder(OrderId, RpcReplyPort<Option<Arc<Order>>>),
    /// All of this customer's orders by id.
    ListOrders(RpcReplyPort<Vec<Arc<Order>>>),
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
            order_ids: args.order_ids,
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: CustomerMsg,
        state: &mut CustomerState,
    ) -> Result<(), ActorProcessingErr> {
        // A failed `send` means the caller gave up waiting; the change stands either way.
        match message {
            CustomerMsg::Get(reply) => {
                let _ = reply.send(state.customer.clone());
            }
            CustomerMsg::Update(changes, reply) => {
                let _ = reply.send(state.update(&changes));
            }
            CustomerMsg::PlaceOrder(body, reply) => {
                let _ = reply.send(state.place_order(&body));
            }
            CustomerMsg::GetOrder(id, reply) => {
                let found = state
                    .orders
                    .binary_search_by_key(&id, |order| order.id)
                    .ok()
                    .map(|at| state.orders[at].clone());
                let _ = reply.send(found);
            }
            CustomerMsg::ListOrders(reply) => {
                let _ = reply.send(state.orders.clone());
            }
        }
        Ok(())
    }
}

impl CustomerState {
    fn update(&mut self, changes: &CustomerChanges) -> Result<Updated, FieldErrors> {
        let next = Arc::new(
            self.customer
                .updated(changes, &self.webstore.settings.require)?,
        );
        let previous = std::mem::replace(&mut self.customer, next.clone());
        Ok(Updated {
            customer: next,
            previous,
        })
    }

    fn place_order(&mut self, body: &Map<String, Value>) -> Result<Arc<Order>, FieldErrors> {
        let details = validate_order(body, &self.webstore, CustomerCheck::Found)?;
        let order = Arc::new(Order {
            id: OrderId(self.order_ids.take()),
            customer_id: self.customer.id,
            details,
            created_at: unix_now(),
        });
        // The sequence only grows and this actor takes its ids one message at a time, so
        // pushing keeps the list sorted by id.
        self.orders.push(order.clone());
        Ok(order)
    }
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs() as i64)
}
