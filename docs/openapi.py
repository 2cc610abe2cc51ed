#!/usr/bin/env python3
"""Writes docs/openapi.json, the OpenAPI 3.1 document of boxsub's v1 API.

Edit this file, not the JSON, then run from the repository root:

    python3 docs/openapi.py docs/openapi.json

The server serves the JSON at GET /v1/openapi.json (it is built into the binary), `cargo test`
checks real responses against it, and CI checks that the JSON is what this script writes.
"""
import json
import sys

OUT = sys.argv[1]


def ref(kind, name):
    return {"$ref": f"#/components/{kind}/{name}"}


def sref(name):
    return ref("schemas", name)


def order_link(operation_id, description):
    """An OpenAPI link from an answer holding an order to `operation_id` on that order."""
    return {"operationId": operation_id, "parameters": {"id": "$response.body#/id"},
            "description": description}


REQ_ID_HEADER = ref("headers", "X-Request-Id")
AUTH = [{"ApiKey": [], "ApiSecret": []}]

# `embed` as the contract reads it: comma-separated names, unknown ones ignored, so any text
# is valid; a query string carries a number or a boolean as its text, one unknown name.
EMBED_SCHEMA = {"type": "array", "items": {"type": ["string", "number", "boolean"]}}

# ---------------------------------------------------------------------------
# Examples (captured from the demo server)
# ---------------------------------------------------------------------------

ADDRESS_EX = {
    "address_1": "1 My Street", "address_2": None, "suburb": None, "city": "London",
    "postcode": None, "delivery_note": None, "home_phone": None, "mobile_phone": None,
    "work_phone": None,
}
CUSTOMER_EX = {
    "id": 1, "first_name": "Joe", "last_name": "Dalton", "name": "Joe Dalton",
    "email": "joe@example.com", "delivery_service_id": 91, "halted?": False,
    "discount?": False, "discount": 0.0, "number": "0001", "account_balance": "0.00",
    "webstore_id": "fantastic-vege-people", "webstore_name": "Fantastic Organic Demo",
}
CUSTOMER_ADDR_EX = dict(CUSTOMER_EX, address=ADDRESS_EX)
ORDER_EX = {
    "id": 1, "customer_id": 1, "box_id": 217, "frequency": "weekly",
    "start_date": "2026-11-24", "week_days": [2], "extras_one_off": False,
    "extras": [{"id": 28, "quantity": 1}], "exclusions": [243], "substitutions": [],
    "created_at": "2026-11-23T14:52:42Z", "active": True, "pause_date": None,
    "resume_date": None, "skipped_dates": [], "cancel_date": None,
    "updated_at": "2026-11-23T14:52:42Z",
}
BOX_EX = {
    "id": 217, "name": "5kg Box", "description": "A family box of seasonal vegetables.",
    "price": "30.00", "likes": True, "dislikes": True, "customizable": True,
    "extras_allowed": True, "extras_limit": -1, "extras_unlimited": True,
    "exclusions_limit": 3, "exclusions_unlimited": False, "substitutions_limit": 2,
    "substitutions_unlimited": False, "updated_at": 1795445543,
}
BOX_EMBED_EX = dict(
    BOX_EX,
    extras=[
        {"id": 28, "name": "Apple Juice", "unit": "4 litres", "price": "7.50"},
        {"id": 29, "name": "Free Range Eggs", "unit": "dozen", "price": "4.20"},
        {"id": 30, "name": "Sourdough Loaf", "unit": "800g", "price": "3.80"},
    ],
    box_items=[
        {"id": 240, "name": "Apple (Red)"}, {"id": 241, "name": "Beetroot"},
        {"id": 242, "name": "Carrots"}, {"id": 243, "name": "Kale"},
        {"id": 244, "name": "Leeks"}, {"id": 245, "name": "Potatoes"},
    ],
    images={"thumb": "https://example.com/images/217-thumb.jpg"},
)
DS_EX = {
    "id": 91, "name": "Courier (All Regions)", "instructions": "Left at the door before 8am.",
    "fee": "5.00", "pickup_point": False, "mon": True, "tue": True, "wed": True, "thu": True,
    "fri": True, "sat": False, "sun": False,
    "name_days_and_fee": "Courier (All Regions) - Mon, Tue, Wed, Thu, Fri - £5.00",
}
DS2_EX = {
    "id": 92, "name": "Market Pickup", "instructions": "Collect from our stall, 9am to 1pm.",
    "fee": "0.00", "pickup_point": True, "mon": False, "tue": False, "wed": False,
    "thu": False, "fri": False, "sat": True, "sun": False,
    "name_days_and_fee": "Market Pickup - Sat - £0.00",
}
WEBSTORE_EX = {
    "id": "fantastic-vege-people", "name": "Fantastic Organic Demo", "locale": "en",
    "currency": "GBP", "time_zone": "London", "city": "London", "email": "demo@example.com",
    "phone": "020 7946 0000",
    "sidebar_description": "Organic vegetable boxes delivered across London.",
    "active": True, "payment_options": ["cash_on_delivery", "bank_deposit"],
    "require_phone": False, "require_address_1": True, "require_address_2": False,
    "require_suburb": False, "require_city": True, "require_postcode": False,
    "require_delivery_note": False, "collect_phone": True, "collect_delivery_note": True,
}
DELIVERY_EX = {
    "date": "2026-11-24", "order_id": 1, "customer_id": 1, "customer_number": "0001",
    "customer_name": "Joe Dalton", "delivery_service_id": 91, "box_id": 217,
    "box_name": "5kg Box", "exclusions": [{"id": 243, "name": "Kale"}], "substitutions": [],
    "extras": [{"id": 28, "name": "Apple Juice", "unit": "4 litres", "quantity": 1}],
    "price": "42.50", "status": "pending",
    "address": ADDRESS_EX,
}
CSV_EX = (
    "date,order_id,customer_id,customer_number,customer_name,delivery_service_id,box_id,"
    "box_name,exclusions,substitutions,extras,price,status,address_1,address_2,suburb,city,postcode,"
    "delivery_note,home_phone,mobile_phone,work_phone\n"
    "2026-11-24,1,1,0001,Joe Dalton,91,217,5kg Box,Kale,,Apple Juice (4 litres) x 1,42.50,pending,"
    "1 My Street,,,London,,,,,\n"
    "2026-11-24,2,2,0002,Ann Lee,91,217,5kg Box,,Leeks,Free Range Eggs (dozen) x 2,38.00,pending,"
    "2 Road,,,London,12345,Back door,,,\n"
)
CUSTOMER_CREATE_EX = {
    "customer": {
        "first_name": "Joe", "last_name": "Dalton", "email": "joe@example.com",
        "delivery_service_id": 91, "password": "correct horse",
        "address": {"address_1": "1 My Street", "city": "London"},
    }
}
ORDER_CREATE_EX = {
    "order": {
        "customer_id": 1, "box_id": 217, "frequency": "weekly",
        "exclusions": [243], "extras": [{"id": 28, "quantity": 1}],
    }
}


# Events: Joe is created, his delivery note set, then he orders (webstore events 1 to 3).
CUSTOMER_CREATED_EVENT_EX = {
    "id": "evt_997f5c5bc7682d7682f1b91d63c70d24", "type": "customer.created",
    "sequence": 1, "created_at": "2026-11-23T14:51:08.975Z", "data": CUSTOMER_ADDR_EX,
}
CUSTOMER_UPDATED_EVENT_EX = {
    "id": "evt_0eb326bf1865f7727009811630784686", "type": "customer.updated",
    "sequence": 2, "created_at": "2026-11-23T14:51:30.988Z",
    "data": dict(CUSTOMER_EX, address=dict(ADDRESS_EX, delivery_note="Back door")),
}
ORDER_CREATED_EVENT_EX = {
    "id": "evt_99033e91be96dfb4369e6ea6dff3bc81", "type": "order.created",
    "sequence": 3, "created_at": "2026-11-23T14:52:42.301Z", "data": ORDER_EX,
}
ORDER_UPDATED_EVENT_EX = {
    "id": "evt_5c0f1d2ab0b8e1c94a0e7d63f2a1b9c4", "type": "order.updated",
    "sequence": 4, "created_at": "2026-12-01T09:30:00.512Z",
    "data": dict(ORDER_EX, pause_date="2026-12-22", resume_date="2027-01-05",
                 updated_at="2026-12-01T09:30:00Z"),
}
# The cursor of webstore fantastic-vege-people after its event 3.
CURSOR_EX = "ZmFudGFzdGljLXZlZ2UtcGVvcGxlCjM"
# The Standard Webhooks example signature (secret whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw).
SIGNATURE_EX = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def ex(summary, value):
    return {"summary": summary, "value": value}


# ---------------------------------------------------------------------------
# Schemas
# ---------------------------------------------------------------------------

MONEY = {
    "type": "string", "pattern": "^[0-9]+\\.[0-9]{2}$",
    "description": "An amount of money as a decimal string with two places, e.g. `\"30.00\"`.",
    "examples": ["30.00"],
}
SIGNED_MONEY = {
    "type": "string", "pattern": "^-?[0-9]+\\.[0-9]{2}$",
    "description": "A signed amount of money as a decimal string with two places, e.g. `\"-12.50\"`.",
    "examples": ["-12.50"],
}
ID = {"type": "integer", "minimum": 1}
DATE = {"type": "string", "format": "date", "description": "A civil date, `YYYY-MM-DD`."}


def closed(props, required=None, description=None, **extra):
    s = {"type": "object"}
    if description:
        s["description"] = description
    s["properties"] = props
    s["required"] = list(props) if required is None else required
    s["additionalProperties"] = False
    s.update(extra)
    return s


ADDRESS_FIELDS = ["address_1", "address_2", "suburb", "city", "postcode", "delivery_note",
                  "home_phone", "mobile_phone", "work_phone"]

schemas = {}

schemas["Message"] = closed(
    {"message": {"type": "string", "description": "A human-readable sentence."}},
    description="The body of every error except validation failures (`{\"message\": ...}`).",
    examples=[{"message": "Resource not found"}],
)
schemas["OutcomeMessage"] = closed(
    {"message": {"type": "string", "description": "A human-readable sentence."},
     "outcome": {"type": "string", "enum": ["nothing_changed", "unknown"],
                 "description": (
                     "What became of the request's write: `nothing_changed` (every 503: "
                     "nothing of it was stored; send it again) or `unknown` (504: it was "
                     "begun and may or may not be stored; send it again with the same "
                     "`Idempotency-Key`, or read the record)."),
                 }},
    description="The body of a 503 or a 504: a message, and what became of the write.",
    examples=[{"message": "Service temporarily unavailable. Try again shortly.",
               "outcome": "nothing_changed"}],
)
schemas["ValidationErrors"] = closed(
    {"errors": {
        "type": "object",
        "description": (
            "Every failing field at once, by field path: a top-level field (`email`), a "
            "nested one (`address.city`, `address.phone`), an array element "
            "(`extras[1]`, `extras[1].quantity`), a query parameter (`page`, `per_page`, "
            "`date`, `customer_id`, `delivery_service_id`; `after`, `type`, `limit` of "
            "the events feed) or the `Idempotency-Key` header "
            "(`idempotency_key`). Each holds one or more messages such as `can't be blank`, "
            "`is invalid`, `has already been taken`, `is not included in the list`, "
            "`is too long (maximum is 255 characters)`."),
        "minProperties": 1,
        "additionalProperties": {
            "type": "array", "minItems": 1, "items": {"type": "string"},
        },
    }},
    description="The body of a 422 validation failure.",
    examples=[{"errors": {"first_name": ["can't be blank"],
                          "email": ["has already been taken"]}}],
)

schemas["Address"] = closed(
    {name: {"type": ["string", "null"]} for name in ADDRESS_FIELDS},
    description=(
        "A customer's address. Every field is always present; a field never set (or "
        "cleared) is `null`."),
    examples=[ADDRESS_EX],
)

schemas["Customer"] = closed(
    {
        "id": dict(ID, description="Server-assigned id, unique across webstores."),
        "first_name": {"type": "string", "minLength": 1},
        "last_name": {"type": ["string", "null"]},
        "name": {"type": "string",
                 "description": "`first_name` and `last_name` joined by one space, or just "
                                "`first_name`."},
        "email": {"type": "string",
                  "description": "As the customer gave it (trimmed); unique in the webstore "
                                 "ignoring case."},
        "delivery_service_id": ID,
        "halted?": {"type": "boolean",
                    "description": "Whether the customer is halted (`PATCH` with "
                                   "`\"halted\": true`): from the first delivery date "
                                   "after the cut-off on, none of its orders is delivered "
                                   "until the halt ends."},
        "discount?": {"type": "boolean", "description": "Whether the customer's account has a discount."},
        "discount": {"type": "number", "description": "The account's discount on box and extras: a fraction from 0 to 1, at most four decimals (`0.0` for none)."},
        "number": {"type": "string", "pattern": "^[0-9]{4,}$",
                   "description": "The customer's number in its webstore, from 1, zero-padded "
                                  "to at least four digits."},
        "account_balance": dict(SIGNED_MONEY, description="The account's balance, the sum of its transactions, with a sign where negative (`\"-12.50\"`)."),
        "webstore_id": {"type": "string"},
        "webstore_name": {"type": "string"},
        "address": dict(sref("Address"),
                        description="Only with `embed=address`."),
    },
    required=["id", "first_name", "last_name", "name", "email", "delivery_service_id",
              "halted?", "discount?", "discount", "number", "account_balance",
              "webstore_id", "webstore_name"],
    description="A customer as served. The password is never returned.",
    examples=[CUSTOMER_ADDR_EX],
)

schemas["ExtraLine"] = closed(
    {"id": ID, "quantity": {"type": "integer", "minimum": 1, "maximum": 1000}},
    description="A quantity of one extra on an order.",
)

schemas["Order"] = closed(
    {
        "id": dict(ID, description="Server-assigned; unique and increasing, not dense."),
        "customer_id": ID,
        "box_id": ID,
        "frequency": {"type": "string", "enum": ["single", "weekly", "fortnightly"]},
        "start_date": dict(DATE, description="The first date a delivery may happen on."),
        "week_days": {
            "type": "array", "uniqueItems": True, "minItems": 1, "maxItems": 7,
            "items": {"type": "integer", "minimum": 0, "maximum": 6},
            "description": "Days of delivery, Sunday = 0 … Saturday = 6, in ascending order.",
        },
        "extras_one_off": {"type": "boolean",
                           "description": "`true`: the extras come with the first delivery "
                                          "only."},
        "extras": {"type": "array", "items": sref("ExtraLine")},
        "exclusions": {"type": "array", "items": ID,
                       "description": "Excluded box-item ids."},
        "substitutions": {"type": "array", "items": ID,
                          "description": "Substitute box-item ids."},
        "created_at": {"type": "string", "format": "date-time",
                       "description": "RFC 3339, UTC, whole seconds."},
        "active": {"type": "boolean",
                   "description": "`false` once cancelled (`cancel_date` is then set)."},
        "pause_date": dict(DATE, type=["string", "null"],
                           description="The first date of the pause, or `null`: no "
                                       "delivery on dates `pause_date <= d < resume_date`, "
                                       "or from `pause_date` on while `resume_date` is "
                                       "`null`."),
        "resume_date": dict(DATE, type=["string", "null"],
                            description="The first date delivered again after the pause, "
                                        "or `null`."),
        "skipped_dates": {"type": "array", "items": DATE, "maxItems": 100,
                          "description": "Delivery dates not delivered, sorted."},
        "cancel_date": dict(DATE, type=["string", "null"],
                            description="The first date not delivered once `active` is "
                                        "`false`; `null` while active."),
        "updated_at": {"type": "string", "format": "date-time",
                       "description": "RFC 3339, UTC, whole seconds: the latest change "
                                      "(`created_at` until the order changes)."},
    },
    description=(
        "An order as served: one box (quantity 1) for one customer, with its schedule. The "
        "content fields show the latest version (a change may take effect from a later "
        "date: deliveries before it keep what was in force then; see "
        "`/v1/orders/{id}/deliveries`)."),
    examples=[ORDER_EX],
)

DELIVERY_PRICE = dict(MONEY, description="What it costs: frozen with a frozen date (box and "
                                          "extras less the customer's discount, plus the "
                                          "delivery service's fee), else at today's prices.")
DELIVERY_STATUS = {"type": "string", "enum": ["pending", "delivered", "not_delivered"],
                   "description": "`pending` until its date is frozen and charged; "
                                  "`delivered` (charged) or `not_delivered` (its charge "
                                  "reversed, or never charged)."}
schemas["OrderDelivery"] = closed(
    {
        "date": DATE,
        "box_id": ID,
        "extras": {"type": "array", "items": sref("ExtraLine"),
                   "description": "The extras that go that day (one-off extras with the "
                                  "first delivery only)."},
        "exclusions": {"type": "array", "items": ID},
        "substitutions": {"type": "array", "items": ID},
        "locked": {"type": "boolean",
                   "description": "`true` once the date's list is locked for packing (the "
                                  "webstore's cut-off has passed): it no longer changes."},
        "price": DELIVERY_PRICE,
        "status": DELIVERY_STATUS,
    },
    description="One delivery of an order: what goes out that day, as the versions in force "
                "then say.",
)

schemas["BoxExtra"] = closed(
    {"id": ID, "name": {"type": "string"}, "unit": {"type": "string"}, "price": MONEY},
    description="An extra a box offers.",
)
schemas["BoxItem"] = closed(
    {"id": ID, "name": {"type": "string"}},
    description="A box item (for exclusions and substitutions).",
)
LIMIT = {"type": "integer", "minimum": -1}
schemas["Box"] = closed(
    {
        "id": ID,
        "name": {"type": "string"},
        "description": {"type": "string"},
        "price": MONEY,
        "likes": {"type": "boolean", "description": "Whether substitutions may be given."},
        "dislikes": {"type": "boolean", "description": "Whether exclusions may be given."},
        "customizable": {"type": "boolean",
                         "description": "`likes || dislikes || extras_allowed`."},
        "extras_allowed": {"type": "boolean"},
        "extras_limit": dict(LIMIT, description="Most total quantity of extras; -1 = "
                                                "unlimited."),
        "extras_unlimited": {"type": "boolean"},
        "exclusions_limit": dict(LIMIT, description="Most exclusions; -1 = unlimited."),
        "exclusions_unlimited": {"type": "boolean"},
        "substitutions_limit": dict(LIMIT, description="Most substitutions; -1 = unlimited."),
        "substitutions_unlimited": {"type": "boolean"},
        "updated_at": {"type": "integer",
                       "description": "Unix time (seconds) of the box's last change."},
        "extras": {"type": "array", "items": sref("BoxExtra"),
                   "description": "Only with `embed=extras`: the extras this box offers."},
        "box_items": {"type": "array", "items": sref("BoxItem"),
                      "description": "Only with `embed=box_items`: every box item of the "
                                     "webstore."},
        "images": {"type": "object", "additionalProperties": {"type": "string"},
                   "description": "Only with `embed=images`: image URLs by size name."},
    },
    required=["id", "name", "description", "price", "likes", "dislikes", "customizable",
              "extras_allowed", "extras_limit", "extras_unlimited", "exclusions_limit",
              "exclusions_unlimited", "substitutions_limit", "substitutions_unlimited",
              "updated_at"],
    description="A box on offer (hidden boxes are never served).",
    examples=[BOX_EMBED_EX],
)

DAY = {"type": "boolean"}
schemas["DeliveryService"] = closed(
    {
        "id": ID,
        "name": {"type": "string"},
        "instructions": {"type": "string"},
        "fee": MONEY,
        "pickup_point": {"type": "boolean"},
        "mon": DAY, "tue": DAY, "wed": DAY, "thu": DAY, "fri": DAY, "sat": DAY, "sun": DAY,
        "name_days_and_fee": {"type": "string",
                              "description": "Name, delivery days and fee with the "
                                             "currency symbol, for display."},
    },
    description="A delivery service and the weekdays it delivers on.",
    examples=[DS_EX],
)

schemas["Webstore"] = closed(
    {
        "id": {"type": "string"}, "name": {"type": "string"}, "locale": {"type": "string"},
        "currency": {"type": "string"},
        "time_zone": {"type": "string",
                      "description": "A Rails zone name (`London`) or a tz database name "
                                     "(`Europe/London`)."},
        "city": {"type": "string"}, "email": {"type": "string"}, "phone": {"type": "string"},
        "sidebar_description": {"type": "string"}, "active": {"type": "boolean"},
        "payment_options": {"type": "array", "items": {"type": "string"}},
        "require_phone": {"type": "boolean",
                          "description": "New customers must give at least one phone number."},
        "require_address_1": {"type": "boolean"}, "require_address_2": {"type": "boolean"},
        "require_suburb": {"type": "boolean"}, "require_city": {"type": "boolean"},
        "require_postcode": {"type": "boolean"},
        "require_delivery_note": {"type": "boolean"},
        "collect_phone": {"type": "boolean"}, "collect_delivery_note": {"type": "boolean"},
    },
    description="The caller's webstore settings. API keys are never part of them.",
    examples=[WEBSTORE_EX],
)

schemas["NamedItem"] = closed({"id": ID, "name": {"type": "string"}},
                              description="A box item by id and name.")
schemas["DeliveredExtra"] = closed(
    {"id": ID, "name": {"type": "string"}, "unit": {"type": "string"},
     "quantity": {"type": "integer", "minimum": 1}},
    description="An extra delivered, named.",
)
schemas["Delivery"] = closed(
    {
        "date": DATE,
        "order_id": ID,
        "customer_id": ID,
        "customer_number": {"type": "string", "pattern": "^[0-9]{4,}$"},
        "customer_name": {"type": "string"},
        "delivery_service_id": ID,
        "box_id": ID,
        "box_name": {"type": "string"},
        "exclusions": {"type": "array", "items": sref("NamedItem")},
        "substitutions": {"type": "array", "items": sref("NamedItem")},
        "extras": {"type": "array", "items": sref("DeliveredExtra"),
                   "description": "Every delivery's extras, or, when the order's "
                                  "`extras_one_off` is true, only the first delivery's "
                                  "(empty on later ones)."},
        "price": DELIVERY_PRICE,
        "status": DELIVERY_STATUS,
        "address": sref("Address"),
    },
    description="One delivery of the delivery list: an order delivered on `date`.",
    examples=[DELIVERY_EX],
)

# --- events ----------------------------------------------------------------

def event(kind, data, made_by, example):
    return closed(
        {
            "id": {"type": "string", "pattern": "^evt_[0-9a-f]{32}$",
                   "description": "Unique across webstores; the same in the feed and in every "
                                  "webhook delivery of the event (`webhook-id`)."},
            "type": {"type": "string", "const": kind},
            "sequence": {"type": "integer", "minimum": 1,
                         "description": "The event's number in its webstore: it increases "
                                        "in the order the writes were made. Gaps are "
                                        "possible (a write refused after its number was "
                                        "taken)."},
            "created_at": {"type": "string", "format": "date-time",
                           "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:"
                                      "[0-9]{2}\\.[0-9]{3}Z$",
                           "description": "When the change was made: RFC 3339, UTC, with "
                                          "milliseconds."},
            "data": data,
        },
        description=f"`{kind}`: made by {made_by}, in the same durable write as the change.",
        examples=[example],
    )


CUSTOMER_DATA = {
    "description": "The customer as `GET /v1/customers/{id}?embed=address` answered right "
                   "after the change: the address is always there.",
    "allOf": [sref("Customer"), {"required": ["address"]}],
}
ORDER_DATA = dict(sref("Order"), description="The order as `GET /v1/orders/{id}` answers it.")

schemas["CustomerCreatedEvent"] = event(
    "customer.created", CUSTOMER_DATA, "`POST /v1/customers`", CUSTOMER_CREATED_EVENT_EX)
schemas["CustomerUpdatedEvent"] = event(
    "customer.updated", CUSTOMER_DATA,
    "every successful `PATCH` or `PUT /v1/customers/{id}` (also one that changes nothing)",
    CUSTOMER_UPDATED_EVENT_EX)
schemas["OrderCreatedEvent"] = event(
    "order.created", ORDER_DATA, "`POST /v1/orders`", ORDER_CREATED_EVENT_EX)
schemas["OrderUpdatedEvent"] = event(
    "order.updated", ORDER_DATA,
    "every `PATCH` or `PUT /v1/orders/{id}` that changes the order (one that changes nothing "
    "makes none)", ORDER_UPDATED_EVENT_EX)
schemas["Event"] = {
    "description": (
        "What one write of the API changed: the resource as `GET` returns it at the time of "
        "the change. The feed (`GET /v1/events`) and the webhooks carry the same JSON."),
    "oneOf": [sref("CustomerCreatedEvent"), sref("CustomerUpdatedEvent"),
              sref("OrderCreatedEvent"), sref("OrderUpdatedEvent")],
    "discriminator": {"propertyName": "type", "mapping": {
        "customer.created": "#/components/schemas/CustomerCreatedEvent",
        "customer.updated": "#/components/schemas/CustomerUpdatedEvent",
        "order.created": "#/components/schemas/OrderCreatedEvent",
        "order.updated": "#/components/schemas/OrderUpdatedEvent",
    }},
}
schemas["EventsPage"] = closed(
    {
        "events": {"type": "array", "items": sref("Event"), "maxItems": 1000,
                   "description": "Oldest first, at most `limit`. Empty when nothing "
                                  "(of the types asked for) happened after `after` yet."},
        "next": {"type": "string", "minLength": 1,
                 "description": "The cursor to ask with next (`after`): always present, also "
                                "with an empty page. Opaque."},
        "has_more": {"type": "boolean",
                     "description": "Whether the feed holds events after `next` now: the "
                                    "page ended because it was full or had looked at 2000 "
                                    "events (of any type), not because it reached the "
                                    "newest. Ask again at once when it is true; when it is "
                                    "false, you have every event there is for now."},
    },
    description="One page of the events feed.",
    examples=[{"events": [CUSTOMER_CREATED_EVENT_EX, CUSTOMER_UPDATED_EVENT_EX,
                          ORDER_CREATED_EVENT_EX], "next": CURSOR_EX, "has_more": False}],
)

# --- request bodies --------------------------------------------------------

schemas["IdInput"] = {
    "description": "A positive integer id, as a JSON number or a string of decimal digits.",
    "anyOf": [
        {"type": "integer", "minimum": 1},
        {"type": "string", "pattern": "^0*[1-9][0-9]*$"},
    ],
}


# A text field of a request takes a number as its text (`"mobile_phone": 5` stores "5"), as
# the platform boxsub replaces did (`fields::text`): so its schema is a string or a number,
# and says so, lest a schema-driven client take the number's acceptance for a bug.
NUMBER_AS_TEXT = "A number is taken as its JSON text (`5` is stored as `\"5\"`)."


def text_input(max_len, nullable=False, description=None):
    types = ["string", "number"] + (["null"] if nullable else [])
    s = {"type": types, "maxLength": max_len,
         "description": " ".join(filter(None, [description, NUMBER_AS_TEXT]))}
    return s


ADDRESS_INPUT_PROPERTIES = {
    name: text_input(1000 if name == "delivery_note" else 255, nullable=True,
                     description="Trimmed; an empty string or `null` clears it.")
    for name in ADDRESS_FIELDS
}
ADDRESS_INPUT_COMMON = (
    "Each field is a string or a number (a number is taken as its JSON text), trimmed, at "
    "most 255 characters (`delivery_note`: 1000). An empty string or `null` clears the field. "
    "`null` for the whole address is ignored. Unknown fields are ignored. Which fields a "
    "webstore requires is in its `require_*` settings (`GET /v1/webstore`); "
    "`require_phone` means at least one of `home_phone`, `mobile_phone`, `work_phone` "
    "(error field `address.phone`).")

# Two schemas, not one shared: a create and a partial update differ in what must be
# present, and a tool that learns rules from one operation's answers must not carry them
# to the other.
schemas["AddressCreate"] = {
    "type": ["object", "null"],
    "description": (
        "The new customer's address. A field the webstore requires must be present and "
        "non-blank (`can't be blank` otherwise); the others may be left out. "
        + ADDRESS_INPUT_COMMON),
    "properties": ADDRESS_INPUT_PROPERTIES,
}
schemas["AddressUpdate"] = {
    "type": ["object", "null"],
    "description": (
        "A partial update of the address: every field is optional, and a field left out "
        "keeps its value, so `{\"city\": \"York\"}` changes the city alone. A field the "
        "webstore requires may be changed but not cleared (`can't be blank`). "
        + ADDRESS_INPUT_COMMON),
    "properties": ADDRESS_INPUT_PROPERTIES,
}

NAME_TEXT = {
    "type": ["string", "number"], "minLength": 1, "maxLength": 255, "pattern": "\\S",
    "description": "Trimmed; must not be blank; at most 255 characters. " + NUMBER_AS_TEXT,
}
EMAIL_TEXT = {
    "type": "string", "maxLength": 255, "pattern": "^\\s*[^@\\s]+@[^@\\s]+\\s*$",
    "description": "Trimmed; one `@` with text on both sides, no white space or control "
                   "characters, at most 255 characters. Unique in the webstore ignoring "
                   "case (`has already been taken`). A number is read as its JSON text, "
                   "which is never an email (`is invalid`).",
    "examples": ["joe@example.com"],
}
PASSWORD = {
    "type": ["string", "null"], "minLength": 8, "maxLength": 128, "writeOnly": True,
    "description": "8 to 128 characters; stored as an argon2id hash, never returned. "
                   "Without one the customer cannot sign in. `null` is ignored.",
}

customer_props = {
    "first_name": NAME_TEXT,
    "last_name": text_input(255, nullable=True,
                            description="Trimmed; at most 255 characters. An empty string "
                                        "or `null` clears it."),
    "email": EMAIL_TEXT,
    "delivery_service_id": dict(
        sref("IdInput"),
        description="A delivery service of the caller's webstore (`is invalid` otherwise)."),
    "password": PASSWORD,
}

schemas["CustomerCreate"] = {
    "type": "object",
    "description": (
        "A new customer. Unknown fields, and fields the server owns (`id`, `number`, "
        "`name`, ...), are ignored."),
    "required": ["first_name", "email", "delivery_service_id"],
    "properties": dict(customer_props, address=sref("AddressCreate")),
    "examples": [CUSTOMER_CREATE_EX["customer"]],
}
schemas["CustomerUpdate"] = {
    "type": "object",
    "description": (
        "The fields to change; absent fields keep their value (PATCH and PUT alike). "
        "`first_name`, `email` and `delivery_service_id` may not be `null` or blank. "
        "Unknown fields are ignored."),
    "properties": dict(
        customer_props, address=sref("AddressUpdate"),
        halted={"type": ["boolean", "string"],
                "description": "`true` halts the customer, `false` ends the halt, from the "
                               "first delivery date after the cut-off: none of a halted "
                               "customer's orders is delivered. `\"true\"`/`\"false\"` "
                               "also; anything else (`null` too) is `must be true or "
                               "false`."}),
    "examples": [{"last_name": "Lee", "address": {"delivery_note": "Back door"}},
                 {"halted": True}],
}


def wrapped(name, envelope):
    """A body that is `name`, bare or under `envelope`: when `envelope` holds an object, that
    object is the body and every other top-level field is ignored (as Rails' parameter
    wrapping sends both); otherwise the whole object is the body."""
    return {
        "description": (
            f"The body may be bare or wrapped as `{{\"{envelope}\": {{...}}}}`; both mean the "
            f"same. When `{envelope}` holds an object, that object is the body and other "
            "top-level fields are ignored. It must be a JSON object (422 `Invalid JSON` "
            "otherwise) of at most 64 KiB (413 past it)."),
        "type": "object",
        "if": {"required": [envelope], "properties": {envelope: {"type": "object"}}},
        "then": {"properties": {envelope: sref(name)}},
        "else": sref(name),
    }


schemas["CustomerCreateBody"] = wrapped("CustomerCreate", "customer")
schemas["CustomerUpdateBody"] = wrapped("CustomerUpdate", "customer")

schemas["ExtraLineInput"] = {
    "type": "object",
    "required": ["id", "quantity"],
    "description": "An extra the box offers, listed once in the order.",
    "properties": {
        "id": dict(sref("IdInput"),
                   description="An extra the box offers (`is not an extra offered by this "
                               "box`), listed once (`is listed more than once`)."),
        "quantity": {
            "description": "1 to 1000, as a number or a string of digits.",
            "anyOf": [
                {"type": "integer", "minimum": 1, "maximum": 1000},
                {"type": "string", "pattern": "^0*([1-9][0-9]{0,2}|1000)$"},
            ],
        },
    },
}

ITEM_LIST = {
    "type": ["array", "null"], "maxItems": 100, "uniqueItems": True,
    "items": sref("IdInput"),
}
schemas["OrderCreate"] = {
    "type": "object",
    "description": (
        "A new order: one box for one customer. Unknown fields (e.g. `payment_method`) "
        "are ignored. `null` means the same as an absent field, except for `customer_id` "
        "and `box_id`."),
    "required": ["customer_id", "box_id"],
    "properties": {
        "customer_id": dict(sref("IdInput"),
                            description="A customer of the caller's webstore (`is invalid` "
                                        "otherwise)."),
        "box_id": dict(sref("IdInput"),
                       description="A visible box of the caller's webstore."),
        "frequency": {"type": ["string", "null"], "enum": ["single", "weekly", "fortnightly",
                                                          None],
                      "default": "single"},
        "start_date": {
            # Blank means absent, and the server trims spaces around a date.
            "anyOf": [{"type": "null"}, {"type": "string", "format": "date"},
                      {"type": "string", "pattern": "^\\s*(\\d{4}-\\d{2}-\\d{2})?\\s*$"}],
            "description": (
                "`YYYY-MM-DD`. Default: the first date after today (in the webstore's time "
                "zone) that is a delivery day of the customer's delivery service and, if "
                "`week_days` was sent, one of them. A past date is accepted. `single`: must "
                "be a delivery day. An empty string means absent."),
        },
        "week_days": {
            "type": ["array", "null"], "uniqueItems": True, "maxItems": 7,
            "description": (
                "Distinct days, Sunday = 0 … Saturday = 6, as numbers or digit strings. "
                "Default: `start_date`'s weekday. `weekly`/`fortnightly`: must not be empty "
                "and must all be delivery days of the customer's delivery service. "
                "`single`: if sent, must be exactly `start_date`'s weekday."),
            "items": {"anyOf": [
                {"type": "integer", "minimum": 0, "maximum": 6},
                {"type": "string", "pattern": "^0*[0-6]$"},
            ]},
        },
        "extras_one_off": {
            "description": "`true`: extras come with the first delivery only. Default `false`. "
                           "Also `\"true\"`/`\"false\"`.",
            "anyOf": [{"type": ["boolean", "null"]},
                      {"type": "string", "enum": ["true", "false"]}],
            "default": False,
        },
        "exclusions": dict(ITEM_LIST, description=(
            "Box items left out: distinct box-item ids of the webstore, at most 100, and "
            "within the box's `dislikes` and `exclusions_limit`.")),
        "substitutions": dict(ITEM_LIST, description=(
            "Box items wanted instead: distinct box-item ids, at most 100, within the box's "
            "`likes` and `substitutions_limit`, none of them excluded.")),
        "extras": {
            "type": ["array", "null"], "maxItems": 100, "items": sref("ExtraLineInput"),
            "description": "At most 100 lines; the box must allow extras and its "
                           "`extras_limit` caps the total quantity.",
        },
        "quantity": {
            "description": "Must be 1 if sent: an order is for one box. Post one order per "
                           "box and per unit.",
            "anyOf": [{"type": "integer", "const": 1}, {"type": "string", "pattern": "^0*1$"},
                      {"type": "null"}],
        },
    },
    "examples": [ORDER_CREATE_EX["order"]],
}
schemas["OrderCreateBody"] = wrapped("OrderCreate", "order")

NULLABLE_DATE = dict(DATE, type=["string", "null"])
schemas["OrderUpdate"] = {
    "type": "object",
    "description": (
        "The fields to change (PATCH and PUT alike); absent fields keep their value. `null` "
        "is \"not given\" for a field that cannot be empty (`box_id`, `frequency`, "
        "`extras_one_off`, `week_days`, `effective_date`, `cancel_date`) and \"none\" for "
        "one that can (the lists: emptied; `pause_date`: no pause; `resume_date`: no end to "
        "the pause); `active: null` is refused. Every "
        "change takes effect from the first delivery date after the cut-off or later, so "
        "the deliveries of a date already locked for packing never change: a change that "
        "would reach one is a 422 naming the field, with the earliest date it could take "
        "effect. Any other field is a 422 naming it: the server's own (`id`, "
        "`customer_id`, `created_at`, `updated_at`) `is read-only`, the rest `is not a "
        "field of an order that can be changed`."),
    "properties": {
        "box_id": {"anyOf": [sref("IdInput"), {"type": "null"}],
                   "description": "As on create; `null` is not given."},
        "extras": {"type": ["array", "null"], "maxItems": 100, "items": sref("ExtraLineInput"),
                   "description": "As on create: the whole list; `null` empties it."},
        "exclusions": {"type": ["array", "null"], "maxItems": 100, "items": sref("IdInput"),
                       "description": "As on create: the whole list; `null` empties it."},
        "substitutions": {"type": ["array", "null"], "maxItems": 100,
                          "items": sref("IdInput"),
                          "description": "As on create: the whole list; `null` empties it."},
        "extras_one_off": {"description": "As on create; `null` is not given."},
        "frequency": {"description": "As on create; a new frequency or `week_days` starts "
                                     "the schedule on `effective_date`; `null` is not "
                                     "given."},
        "week_days": {"description": "As on create; `null` is not given."},
        "effective_date": dict(NULLABLE_DATE,
                               description="When the content fields above take effect; "
                                           "default (also for `null`): the first delivery "
                                           "date after the cut-off. Only with one of them."),
        "pause_date": dict(NULLABLE_DATE,
                           description="Start or move the pause; `null` ends it (from the "
                                       "first open date)."),
        "resume_date": dict(NULLABLE_DATE,
                            description="The first date delivered again; after "
                                        "`pause_date`; `null`: the pause has no end."),
        "skipped_dates": {"type": ["array", "null"], "maxItems": 100, "items": DATE,
                          "description": "The whole list of delivery dates not delivered; "
                                         "each a delivery date of the order's schedule "
                                         "(else `skipped_dates[i]` is named); at most 100; "
                                         "`null` empties it."},
        "active": {"type": ["boolean", "string"],
                   "description": "`false` cancels (from `cancel_date`); `true` takes a "
                                  "cancelled order back from the first date after the "
                                  "cut-off. Also `\"true\"`/`\"false\"`; anything else "
                                  "(`null` too) is `must be true or false`."},
        "cancel_date": dict(NULLABLE_DATE,
                            description="With `active: false`: the first date not "
                                        "delivered; default (also for `null`) the first "
                                        "delivery date after the cut-off."),
    },
    "examples": [{"pause_date": "2026-12-22", "resume_date": "2027-01-05"},
                 {"skipped_dates": ["2026-12-29"]},
                 {"box_id": 218, "effective_date": "2026-12-08"},
                 {"active": False}],
}
schemas["OrderUpdateBody"] = wrapped("OrderUpdate", "order")

schemas["SignIn"] = {
    "type": "object",
    "description": "Sign-in parameters. Numbers are read as their JSON text and null as "
                   "missing; any other type is a 422 `is invalid` naming the field. Other "
                   "fields are ignored.",
    "properties": {
        "email": {"type": ["string", "number", "null"],
                  "description": "Trimmed and matched ignoring case. Empty or null means "
                                 "missing."},
        "password": {"type": ["string", "number", "null"], "writeOnly": True,
                     "description": "Empty or null means missing."},
        "embed": {"type": ["string", "number", "null"],
                  "description": "`address` to embed the address."},
    },
    "examples": [{"email": "joe@example.com", "password": "correct horse"}],
}
schemas["SignInBody"] = dict(
    wrapped("SignIn", "customer"),
    description="Bare, or wrapped as `{\"customer\": {...}}` (then other top-level "
                "fields are ignored).")
schemas["SignInForm"] = {
    "type": "object",
    "description": "Form fields `email`, `password`, `embed`; Rails-style "
                   "`customer[email]`, `customer[password]`, `customer[embed]` also work.",
    "properties": {
        "email": {"type": "string"},
        "password": {"type": "string", "writeOnly": True},
        "embed": {"type": "string"},
        "customer[email]": {"type": "string"},
        "customer[password]": {"type": "string", "writeOnly": True},
        "customer[embed]": {"type": "string"},
    },
}

# ---------------------------------------------------------------------------
# Headers, parameters, responses
# ---------------------------------------------------------------------------

headers = {
    "X-Request-Id": {
        "description": "Identifies this request in the server's log: the request's "
                       "`X-Request-Id` if it sent a usable one (1 to 128 visible ASCII "
                       "characters), otherwise one the server generated (24 hexadecimal "
                       "digits). Sent on every response of the API; answers the HTTP layer "
                       "writes on its own (a 503 at the connection cap, a 431, a 400 for a "
                       "request that is not HTTP) carry none.",
        "schema": {"type": "string", "minLength": 1, "maxLength": 128},
    },
    "Location": {
        "description": "The path of the created or updated record, e.g. `/v1/customers/1`.",
        "schema": {"type": "string", "format": "uri-reference"},
    },
    "Idempotent-Replayed": {
        "description": "`true` when this is the recorded response of an earlier request with "
                       "the same `Idempotency-Key` and body; absent otherwise.",
        "schema": {"type": "string", "enum": ["true"]},
    },
    "X-Total-Count": {
        "description": "How many elements the whole list has (all pages).",
        "schema": {"type": "integer", "minimum": 0},
    },
    "Link": {
        "description": (
            "RFC 8288 links to pages of the list, relative to the server: `next` (when "
            "there is a later page), `prev` (when `page` > 1), `first` and `last`. Each "
            "carries `page`, `per_page` and the list's other query parameters, e.g. "
            "`</v1/customers?page=2&per_page=1>; rel=\"next\", "
            "</v1/customers?page=1&per_page=1>; rel=\"first\", "
            "</v1/customers?page=2&per_page=1>; rel=\"last\"`."),
        "schema": {"type": "string"},
    },
    "EventsLink": {
        "description": (
            "RFC 8288 link to the next page, relative to the server: `after` is the answer's "
            "`next`, and `type` and `limit` are kept when the request gave them, e.g. "
            f"`</v1/events?after={CURSOR_EX}&type=order.created&limit=50>; "
            "rel=\"next\"`. Always sent with a page, also an empty one."),
        "required": True,
        "schema": {"type": "string"},
    },
    "Retry-After": {
        "description": "Seconds to wait before trying again.",
        "required": True,
        "schema": {"type": "integer", "minimum": 1},
    },
    "RateLimit-Policy": {
        "description": (
            "The caller's webstore's quotas, as draft-ietf-httpapi-ratelimit-headers-11 "
            "writes them (a Structured Fields list): `writes` and `reads` where the "
            "catalogue sets them, each `q` requests in a window of `w` seconds (the burst, "
            "and the seconds it takes to earn it back), and `concurrency`, `q` requests in "
            "progress at once (`qu=\"concurrent-requests\"`), e.g. `\"writes\";q=100;w=1, "
            "\"concurrency\";q=1024;qu=\"concurrent-requests\"`; without rate quotas (the "
            "default) only `concurrency`. On every answer to an authenticated request of a "
            "webstore this node serves."),
        "schema": {"type": "string"},
    },
    "RateLimit": {
        "description": (
            "What is left of the rate quota this request took from (`writes` for creates "
            "and changes, `reads` for everything else): `r` requests that may still come at "
            "once, and `t` seconds until the quota is whole again, e.g. "
            "`\"writes\";r=42;t=1`. A 429 names the quota it went past with `r=0` and `t` "
            "equal to `Retry-After`. On every answer to an authenticated request of a "
            "webstore this node serves whose kind has a rate quota, and on every 429."),
        "schema": {"type": "string", "pattern": "^\"(writes|reads|concurrency)\";r=[0-9]+;t=[0-9]+$"},
    },
    "Allow": {
        "description": "The methods the path supports, e.g. `GET, PATCH, PUT`.",
        "required": True,
        "schema": {"type": "string"},
    },
    "Connection": {
        "description": "`close`: the rest of the body was not read, so the connection is "
                       "closed after this response.",
        "schema": {"type": "string", "enum": ["close"]},
    },
}


def hdrs(*names):
    out = {"X-Request-Id": REQ_ID_HEADER}
    for n in names:
        out[n] = ref("headers", n)
    return out


JSON = "application/json"


def json_content(schema, examples=None):
    c = {"schema": schema}
    if examples:
        c["examples"] = examples
    return {JSON: c}


def msg_ex(*pairs):
    return {k: ex(k.replace("_", " "), {"message": m}) for k, m in pairs}


def outcome_ex(outcome, *pairs):
    return {k: ex(k.replace("_", " "), {"message": m, "outcome": outcome}) for k, m in pairs}


responses = {
    "BadRequest": {
        "description": (
            "The request body could not be read off the connection (for example broken "
            "chunked encoding). The connection is closed. A request the HTTP layer cannot "
            "parse at all gets a 400 with an empty body."),
        "headers": hdrs("Connection"),
        "content": json_content(sref("Message"), msg_ex(
            ("unreadable_body", "Could not read the request body"))),
    },
    "Misdirected": {
        "description": (
            "The caller's webstore is not served by this node: a deployment sharded by "
            "webstore routes each API key to its shard, and this request reached another "
            "(or one the webstore has moved away from). Nothing was changed."),
        "headers": hdrs(),
        "content": json_content(sref("Message"), msg_ex(
            ("misdirected", "This webstore is not served here. Nothing was changed; send the "
                            "request through the deployment's front end."))),
    },
    "Unauthorized": {
        "description": (
            "`API-Key` or `API-Secret` missing, empty or wrong. Checked before anything "
            "else, so an unknown path or a bad body is also a 401 without credentials."),
        "headers": hdrs(),
        "content": json_content(sref("Message"), msg_ex(
            ("missing", "Could not authenticate. You must set the API-Key and API-Secret "
                        "headers."),
            ("invalid", "Could not authenticate. Invalid API-Key or API-Secret headers."))),
    },
    "NotFound": {
        "description": (
            "No such record in the caller's webstore (another webstore's record is "
            "also a 404), or an id segment that is not a positive integer."),
        "headers": hdrs(),
        "content": json_content(sref("Message"), msg_ex(("not_found", "Resource not found"))),
    },
    "MethodNotAllowed": {
        "description": (
            "The path exists but not with this method. `Allow` lists the methods it "
            "supports."),
        "headers": hdrs("Allow"),
        "content": json_content(sref("Message"), msg_ex(
            ("method_not_allowed", "Method not allowed"))),
    },
    "RequestTimeout": {
        "description": (
            "The request body did not arrive within the body deadline (20 s by default). "
            "The connection is closed."),
        "headers": hdrs("Connection"),
        "content": json_content(sref("Message"), msg_ex(
            ("body_timeout", "The request body did not arrive in time"))),
    },
    "PayloadTooLarge": {
        "description": (
            "The body is over 64 KiB (65,536 bytes), whether announced by `Content-Length` "
            "or sent chunked: the connection is closed. Or, on a replicated group, the "
            "change the request makes is larger than the group's changelog takes in one "
            "message (its NATS servers' `max_payload`, less 2 KiB for headers): nothing was "
            "changed, and the connection stays open."),
        "headers": hdrs("Connection"),
        "content": json_content(sref("Message"), msg_ex(
            ("too_large", "Request body too large"),
            ("change_too_large", "This change is larger than the service's replicated "
                                 "changelog takes in one message. Nothing was changed; send a "
                                 "smaller one."))),
    },
    "Unprocessable": {
        "description": (
            "Validation failed: every failing field is named at once "
            "(`ValidationErrors`); or the body is not a JSON object "
            "(`{\"message\": \"Invalid JSON\"}`). Nothing was changed."),
        "headers": hdrs(),
        "content": json_content(
            {"oneOf": [sref("ValidationErrors"), sref("Message")]},
            {
                "validation": ex("Validation failed",
                                 {"errors": {"email": ["has already been taken"],
                                             "address.city": ["can't be blank"]}}),
                "invalid_json": ex("Body is not a JSON object", {"message": "Invalid JSON"}),
            }),
    },
    "QueryUnprocessable": {
        "description": "A query parameter is missing or invalid; each is named.",
        "headers": hdrs(),
        "content": json_content(
            sref("ValidationErrors"),
            {"page": ex("Bad page parameters",
                        {"errors": {"page": ["must be a positive integer"],
                                    "per_page": ["must be less than or equal to 1000"]}})}),
    },
    "EventsQueryUnprocessable": {
        "description": (
            "A parameter of the feed is malformed; each is named: `after` is not a cursor "
            "this service gave (`is invalid`), `type` names an unknown type (`is not "
            "included in the list`), `limit` is not digits (`must be an integer`) or not "
            "1 to 1000 (`must be between 1 and 1000`)."),
        "headers": hdrs(),
        "content": json_content(
            sref("ValidationErrors"),
            {"all": ex("Every parameter wrong",
                       {"errors": {"after": ["is invalid"],
                                   "type": ["is not included in the list"],
                                   "limit": ["must be between 1 and 1000"]}}),
             "limit": ex("Limit not a number", {"errors": {"limit": ["must be an integer"]}})}),
    },
    "Gone": {
        "description": (
            "The cursor can't be read on from: the events right after it are older than "
            "the feed keeps (the retention, 30 days unless the operator set another) and "
            "were removed, or the cursor was given to another webstore. Start again without "
            "`after` (from the oldest event kept); after an expired cursor, reconcile with "
            "the customer and order lists, since events were missed."),
        "headers": hdrs(),
        "content": json_content(sref("Message"), msg_ex(
            ("expired", "The events after this cursor are older than the feed keeps and are "
                        "gone. Start again without `after` (from the oldest event kept) and "
                        "reconcile with the customer and order lists."),
            ("other_webstore", "This cursor was not given to this webstore. Start again "
                               "without `after`."))),
    },
    "TooManyRequests": {
        "description": (
            "The caller's webstore went past one of its quotas (`RateLimit` names it, with "
            "`r=0`): its writes or reads per second, or its requests in progress at once. "
            "Nothing was changed; `Retry-After` says when a request of the same kind may "
            "succeed. For a sign-in, also: 10 failed sign-ins for this email (in this "
            "webstore) within 15 minutes; `Retry-After` says when the oldest of them "
            "expires."),
        "headers": hdrs("Retry-After", "RateLimit-Policy", "RateLimit"),
        "content": json_content(sref("Message"), msg_ex(
            ("writes", "This webstore has made more writes than its quota allows. Nothing "
                       "was changed; try again after Retry-After seconds (RateLimit-Policy "
                       "states the quota)."),
            ("reads", "This webstore has made more reads than its quota allows. Try again "
                      "after Retry-After seconds (RateLimit-Policy states the quota)."),
            ("concurrency", "This webstore has as many requests in progress as its quota "
                            "allows. Nothing was changed; try again when one has been "
                            "answered."),
            ("sign_in", "Too many failed sign-in attempts for this email. Try again "
                        "later."))),
    },
    "HeadTooLarge": {
        "description": (
            "The request head (request line and headers) is too large; keep it under "
            "64 KiB. Written by the HTTP layer with an empty body; the connection is "
            "closed."),
        "headers": {"Connection": ref("headers", "Connection")},
    },
    "InternalError": {
        "description": "A bug. Never carries any detail.",
        "headers": hdrs(),
        "content": json_content(sref("Message"), msg_ex(
            ("internal", "Internal server error"))),
    },
    "Unavailable": {
        "description": (
            "Nothing was changed (`\"outcome\": \"nothing_changed\"`); try again after "
            "`Retry-After` seconds. Overloaded "
            "(too many requests in flight or queued for one customer, too many connections, "
            "too many password checks queued; `Retry-After: 1`), the request ran past its "
            "deadline (30 s by default; `Retry-After: 1`), the store failed "
            "(`Retry-After: 5`), for writes, the disk is nearly full or read-only "
            "(`Retry-After: 30`; reads still work), or this node is a standby of a "
            "replicated group (`Retry-After: 1`: the group's front end sends the retry to "
            "the primary), or, for writes, the webstore is moving to another shard "
            "(`Retry-After: 1`; reads still work), or it has just moved to another shard "
            "and the request reached the one it left (`Retry-After: 1`: sent again, it "
            "reaches the other)."),
        "headers": hdrs("Retry-After"),
        "content": json_content(sref("OutcomeMessage"), outcome_ex(
            "nothing_changed",
            ("overloaded", "Service temporarily unavailable. Try again shortly."),
            ("deadline", "The request took too long and was cut off. Nothing was changed; "
                         "try again shortly."),
            ("disk_full", "The disk of the service is nearly full, so writes are refused "
                          "until space is freed. Nothing was changed; reads still work."),
            ("read_only", "The storage of the service is read-only, so writes are refused. "
                          "Nothing was changed; reads still work."),
            ("storage", "The storage of the service failed. Nothing was changed; try again "
                        "later."),
            ("standby", "This node does not serve its group now (a standby, or a primary "
                        "that has lost touch with its group) and takes no requests. Nothing "
                        "was changed; try again shortly (through the group's front end)."),
            ("moving", "This webstore is moving between hosts: writes are paused for a "
                       "moment. Nothing was changed; try again shortly (reads still work)."),
            ("moved_away", "This webstore has just moved to another host. Nothing was "
                           "changed; try again shortly (through the deployment's front end, "
                           "which sends it there)."))),
    },
    "OutcomeUnknown": {
        "description": (
            "A write this node began (handed to its log or its group's changelog) and cannot "
            "say was stored: it failed after that, ran past the request's deadline, or this "
            "node lost its read lease before the write was acknowledged. It may or may not "
            "be stored (`\"outcome\": \"unknown\"`): send it again with the same "
            "`Idempotency-Key` (the write is made once, or its first answer replayed, on "
            "any node of the group) or read the record. `Retry-After: 1`. Never a 503, so "
            "that a front end retrying 503s never resends it."),
        "headers": hdrs("Retry-After"),
        "content": json_content(sref("OutcomeMessage"), outcome_ex(
            "unknown",
            ("unknown", "The change was begun and this node cannot tell whether it was "
                        "stored. Send it again with the same Idempotency-Key (it is made "
                        "once, or its first answer is replayed, on any node), or read the "
                        "record to find out."))),
    },
}

parameters = {
    "XRequestId": {
        "name": "X-Request-Id", "in": "header", "required": False,
        "description": "Optional id for this request. Kept when it is 1 to 128 visible "
                       "ASCII characters without spaces (`^[\\x21-\\x7e]{1,128}$`), and "
                       "returned in the response's `X-Request-Id`; any other value is "
                       "accepted too and replaced by a new id, so no value is an error.",
        "schema": {"type": "string"},
        "example": "7f3c9a52-checkout",
    },
    "IdempotencyKey": {
        "name": "Idempotency-Key", "in": "header", "required": False,
        "description": (
            "1 to 255 printable ASCII characters, spaces included (an empty key is `can't be blank`; a longer one, a tab or any other character is a 422 naming `idempotency_key`), "
            "chosen by the client, scoped to the webstore and shared "
            "by `POST /v1/customers` and `POST /v1/orders`. The same key with the same body "
            "bytes replays the first 201 (with `Idempotent-Replayed: true`) and creates "
            "nothing; the same key with another body is a 422 naming `idempotency_key`. A "
            "request that fails (4xx) leaves the key unused. Concurrent requests with one "
            "key wait for the first and get the same answer. Keys are kept 24 hours "
            "(longer if the operator says so), then are free again."),
        "schema": {"type": "string", "minLength": 1, "maxLength": 255,
                   "pattern": "^[\\x20-\\x7e]+$"},
        "example": "cart-7f3c9a-checkout-1",
    },
    "Page": {
        "name": "page", "in": "query", "required": False,
        "description": "Page number, from 1 (`must be a positive integer` otherwise). A page "
                       "past the last is an empty list.",
        "schema": {"type": "integer", "minimum": 1, "maximum": 18446744073709551,
                   "default": 1},
    },
    "PerPage": {
        "name": "per_page", "in": "query", "required": False,
        "description": "Elements per page, 1 to 1000.",
        "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100},
    },
    "CustomerEmbed": {
        "name": "embed", "in": "query", "required": False,
        "description": "Comma-separated children to embed: `address`. Any other text is "
                       "accepted and ignored (a number is one unknown name).",
        "style": "form", "explode": False,
        "schema": EMBED_SCHEMA,
        "example": ["address"],
    },
    "BoxEmbed": {
        "name": "embed", "in": "query", "required": False,
        "description": "Comma-separated children to embed: `extras`, `box_items`, "
                       "`images`. Any other text is accepted and ignored (a number is one "
                       "unknown name).",
        "style": "form", "explode": False,
        "schema": EMBED_SCHEMA,
        "example": ["extras", "box_items", "images"],
    },
}


def path_id(what):
    return {
        "name": "id", "in": "path", "required": True,
        "description": f"The {what} id. Anything but a positive integer is a 404.",
        "schema": {"type": "integer", "minimum": 1},
    }


parameters["CustomerIdPath"] = path_id("customer")
parameters["OrderIdPath"] = path_id("order")
parameters["BoxIdPath"] = path_id("box")
parameters["DeliveryServiceIdPath"] = path_id("delivery service")


def p(name):
    return ref("parameters", name)


def r(name):
    return ref("responses", name)


def common(body=False, auth=True, unprocessable=None, not_found=False, throttled=False):
    out = {}
    if body:
        out["400"] = r("BadRequest")
    if auth:
        out["401"] = r("Unauthorized")
        out["421"] = r("Misdirected")
    if not_found:
        out["404"] = r("NotFound")
    out["405"] = r("MethodNotAllowed")
    if body:
        out["408"] = r("RequestTimeout")
        out["413"] = r("PayloadTooLarge")
    if unprocessable:
        out["422"] = r(unprocessable)
    if auth or throttled:
        out["429"] = r("TooManyRequests")
    out["431"] = r("HeadTooLarge")
    out["500"] = r("InternalError")
    out["503"] = r("Unavailable")
    if body:
        out["504"] = r("OutcomeUnknown")
    return out


def op(op_id, summary, description, tag, ok, params=(), auth=True, body=None, **kw):
    o = {"operationId": op_id, "summary": summary, "description": description, "tags": [tag]}
    o["security"] = AUTH if auth else []
    o["parameters"] = [p("XRequestId")] + list(params)
    if body:
        o["requestBody"] = body
    resp = dict(ok)
    resp.update(common(auth=auth, body=body is not None, **kw))
    o["responses"] = dict(sorted(resp.items()))
    return o


CUSTOMER_LIST = {"type": "array", "items": sref("Customer")}

customer_created = {
    "description": (
        "Created. `Location` names the customer. With an `Idempotency-Key` already used "
        "with the same body, this is the first response again, with "
        "`Idempotent-Replayed: true`."),
    "headers": hdrs("Location", "Idempotent-Replayed"),
    "content": json_content(sref("Customer"), {
        "created": ex("Created", CUSTOMER_EX),
        "with_address": ex("Created with ?embed=address", CUSTOMER_ADDR_EX),
    }),
    "links": {
        "GetCustomer": {"operationId": "getCustomer",
                        "parameters": {"id": "$response.body#/id"},
                        "description": "Read the new customer."},
        "UpdateCustomer": {"operationId": "updateCustomer",
                           "parameters": {"id": "$response.body#/id"},
                           "description": "Change the new customer."},
        "ReplaceCustomer": {"operationId": "replaceCustomer",
                            "parameters": {"id": "$response.body#/id"},
                            "description": "Change the new customer with PUT."},
        "ListOrders": {"operationId": "listOrders",
                       "parameters": {"customer_id": "$response.body#/id"},
                       "description": "The new customer's orders (none yet)."},
        "CreateOrder": {"operationId": "createOrder",
                        "requestBody": {"customer_id": "$response.body#/id", "box_id": 217},
                        "description": "Order box 217 (demo catalogue) for the new "
                                       "customer."},
    },
}

customer_updated = {
    "description": "Updated; the customer as it is now. `Location` names it.",
    "headers": hdrs("Location"),
    "content": json_content(sref("Customer"), {
        "updated": ex("Updated", dict(CUSTOMER_EX, id=2, first_name="Ann", last_name="Lee",
                                      name="Ann Lee", email="ann@example.com",
                                      number="0002")),
    }),
}

update_desc = (
    "Changes the fields present in the body and keeps the rest; PATCH and PUT behave "
    "the same (PUT does not clear absent fields). Each field present is checked as on "
    "create; an email held by another customer is `has already been taken` (the "
    "customer's own email in another case is fine). Address fields present replace only "
    "those fields; an update that would leave no phone where the webstore requires one "
    "is a 422 on `address.phone`. An unknown id is a 404 whatever the body says. A "
    "failed update changes nothing. Writes are refused with 503 while the disk is "
    "nearly full.")

update_body = {
    "required": True,
    "description": (
        "The fields to change, bare or wrapped as `{\"customer\": {...}}`. Unknown fields "
        "are ignored. At most 64 KiB."),
    "content": json_content(sref("CustomerUpdateBody"), {
        "bare": ex("Bare", {"last_name": "Lee", "address": {"delivery_note": "Back door"}}),
        "wrapped": ex("Wrapped", {"customer": {"email": "ann.lee@example.com"}}),
    }),
}

order_ok = {
    "description": "The order.",
    "headers": hdrs(),
    "content": json_content(sref("Order"), {"order": ex("An order", ORDER_EX)}),
}

paths = {}

paths["/v1/ping"] = {
    "get": op(
        "ping", "Health check",
        "Answers 204 with no body. Needs no credentials (any that are sent are not "
        "checked). Only GET: other methods need credentials and then get a 405.",
        "Service",
        {"204": {"description": "The service is up.", "headers": hdrs()}},
        auth=False),
}

HEALTH = {
    "type": "object",
    "required": ["role", "node", "state", "applied", "lag"],
    "additionalProperties": False,
    "properties": {
        "role": {"type": "string", "enum": ["primary", "standby"],
                 "description": "Whether this node takes requests."},
        "node": {"type": "string",
                 "description": "The node's name in its group (`--node-name`); empty alone."},
        "state": {"type": "string",
                  "enum": ["standalone", "serving", "stalled", "connecting", "loading", "catching_up",
                           "following", "deposed", "stopping"],
                  "description": "What the node is doing."},
        "applied": {"type": "integer", "minimum": 0,
                    "description": "In a group: the last changelog message applied (on the "
                                   "primary: published)."},
        "lag": {"type": "integer", "minimum": 0,
                "description": "In a group: changelog messages still to apply."},
        "unreadable_records": {
            "type": "array", "items": {"type": "string"}, "maxItems": 64,
            "description": "Left out when none: the keys of the stored records this node found "
                           "it cannot read since it started (the first 64), each passed over "
                           "where it can be; restore them from a backup."},
    },
}

paths["/health"] = {
    "get": {
        "operationId": "health", "summary": "Whether this node takes requests",
        "description": (
            "For load balancers (HAProxy's `option httpchk GET /health`): 200 on a node that "
            "takes requests (a single node, or a replicated group's primary), 503 on a "
            "standby or a node catching up or stepping down. Needs no credentials."),
        "tags": ["Service"], "security": [], "parameters": [],
        "responses": {
            "200": {"description": "This node takes requests.", "headers": hdrs(),
                    "content": json_content(HEALTH)},
            "503": {"description": "This node takes no requests now.",
                    "headers": hdrs("Retry-After"), "content": json_content(HEALTH)},
        },
    },
}

paths["/v1/openapi.json"] = {
    "get": op(
        "getOpenApi", "This OpenAPI document",
        "The OpenAPI 3.1 description of the v1 API (this document). Needs no credentials.",
        "Service",
        {"200": {"description": "The OpenAPI document.", "headers": hdrs(),
                 "content": json_content({"type": "object", "required": ["openapi"],
                                          "properties": {"openapi": {"type": "string"}}})}},
        auth=False),
}

paths["/v1/customers"] = {
    "get": op(
        "listCustomers", "List customers, or find one by email",
        "Without `email`: one page of the webstore's customers in id order, with "
        "`X-Total-Count` and `Link` (`page`, `per_page`). With `email`: the customer with "
        "that email (trimmed, any case) as an array of zero or one, without pagination "
        "headers; `page` and `per_page` do not apply then, but a bad one is still a 422.",
        "Customers",
        {"200": {
            "description": "Customers. `X-Total-Count` and `Link` are sent unless `email` "
                           "was given.",
            "headers": hdrs("X-Total-Count", "Link"),
            "content": json_content(CUSTOMER_LIST, {
                "page": ex("A page", [CUSTOMER_EX]),
                "by_email": ex("Found by email, with ?embed=address", [CUSTOMER_ADDR_EX]),
                "none": ex("No such email", []),
            }),
        }},
        params=[
            {"name": "email", "in": "query", "required": False,
             "description": "Find the customer with this email (trimmed, case ignored).",
             "schema": {"type": "string"}, "example": "JOE@example.com"},
            p("Page"), p("PerPage"), p("CustomerEmbed"),
        ],
        unprocessable="QueryUnprocessable"),
    "post": op(
        "createCustomer", "Create a customer",
        "Creates a customer in the caller's webstore. `first_name`, `email` and "
        "`delivery_service_id` are required, as are the address fields the webstore "
        "requires (`require_*` in `GET /v1/webstore`; in the demo webstore "
        "`address_1` and `city`). Emails are unique per webstore ignoring case. Every "
        "failing field is reported at once. With `Idempotency-Key`, a repeat replays the "
        "first response. Writes are refused with 503 while the disk is nearly full.",
        "Customers",
        {"201": customer_created},
        params=[p("IdempotencyKey"), p("CustomerEmbed")],
        body={
            "required": True,
            "description": (
                "The customer, bare or wrapped as `{\"customer\": {...}}`. Unknown fields "
                "are ignored. At most 64 KiB."),
            "content": json_content(sref("CustomerCreateBody"), {
                "wrapped": ex("Wrapped, with address and password", CUSTOMER_CREATE_EX),
                "bare": ex("Bare, ids as strings", {
                    "first_name": "Ann", "email": "ann@example.com",
                    "delivery_service_id": "91",
                    "address": {"address_1": "2 Road", "city": "London",
                                "postcode": 12345}}),
            }),
        },
        unprocessable="Unprocessable"),
}

paths["/v1/customers/sign_in"] = {
    "post": op(
        "signIn", "Sign a customer in",
        "Checks a customer's email and password. The parameters come from a JSON body "
        "(bare or under `customer`), a form body (`application/x-www-form-urlencoded`; "
        "`customer[email]` style names also work) or the query string; a body value wins "
        "over the query string. The answer is an array: the customer for the right "
        "password, and an empty array for every failure (unknown email, wrong password, "
        "customer without a password), so it does not tell which. A missing or empty "
        "`email` or `password` is a 422 `can't be blank`. Throttled: after 10 failures "
        "for one email (any case) within 15 minutes, attempts are refused with 429 and "
        "`Retry-After` until the oldest failure is 15 minutes old; a success clears the "
        "count. Attempts still being checked count against the limit. Password checks "
        "share one pool between webstores fairly: checks of a webstore past its share "
        "while others wait are a 503 with `Retry-After`. A body that starts "
        "with `{` is read as JSON whatever its content type says (curl's `-d` sends "
        "`application/x-www-form-urlencoded`).",
        "Customers",
        {"200": {
            "description": "`[customer]` for the right password, `[]` otherwise.",
            "headers": hdrs(),
            "content": json_content(
                {"type": "array", "maxItems": 1, "items": sref("Customer")},
                {"signed_in": ex("Signed in", [CUSTOMER_EX]),
                 "rejected": ex("Wrong password or unknown email", [])}),
        }},
        params=[
            {"name": "email", "in": "query", "required": False,
             "description": "Used when the body does not give it. Empty means missing "
                            "(a 422 only if the body does not give it either).",
             "schema": {"type": "string"}},
            {"name": "password", "in": "query", "required": False,
             "description": "Used when the body does not give it. Empty means missing "
                            "(a 422 only if the body does not give it either).",
             "schema": {"type": "string"}},
            {"name": "embed", "in": "query", "required": False,
             "description": "`address` to embed the address; used when the body does not "
                            "give it. Any other text is accepted and ignored.",
             "style": "form", "explode": False,
             "schema": EMBED_SCHEMA},
        ],
        body={
            "required": False,
            "description": "Optional when the query string carries the parameters. At "
                           "most 64 KiB.",
            "content": {
                JSON: {"schema": sref("SignInBody"), "examples": {
                    "bare": ex("Bare", {"email": "joe@example.com",
                                        "password": "correct horse"}),
                    "wrapped": ex("Wrapped", {"customer": {"email": "JOE@example.com",
                                                           "password": "correct horse",
                                                           "embed": "address"}}),
                }},
                "application/x-www-form-urlencoded": {
                    "schema": sref("SignInForm"),
                    "examples": {"form": ex("Form", {"email": "joe@example.com",
                                                     "password": "correct horse"})},
                },
            },
        },
        unprocessable="Unprocessable", throttled=True),
}

paths["/v1/customers/{id}"] = {
    "parameters": [p("CustomerIdPath")],
    "get": op(
        "getCustomer", "Get a customer",
        "The customer with this id in the caller's webstore.",
        "Customers",
        {"200": {"description": "The customer.", "headers": hdrs(),
                 "content": json_content(sref("Customer"), {
                     "plain": ex("Without embed", CUSTOMER_EX),
                     "with_address": ex("With ?embed=address", CUSTOMER_ADDR_EX)})}},
        params=[p("CustomerEmbed")], not_found=True),
    "patch": op(
        "updateCustomer", "Update a customer", update_desc, "Customers",
        {"200": customer_updated}, params=[p("CustomerEmbed")], body=update_body,
        not_found=True, unprocessable="Unprocessable"),
    "put": op(
        "replaceCustomer", "Update a customer (PUT, same as PATCH)", update_desc,
        "Customers", {"200": customer_updated}, params=[p("CustomerEmbed")],
        body=update_body, not_found=True, unprocessable="Unprocessable"),
}

order_created = {
    "description": (
        "Created. `Location` names the order. With an `Idempotency-Key` already used with "
        "the same body, this is the first response again, with "
        "`Idempotent-Replayed: true`."),
    "headers": hdrs("Location", "Idempotent-Replayed"),
    "content": json_content(sref("Order"), {
        "weekly": ex("Weekly", ORDER_EX),
        "defaults": ex("Defaults (single, next delivery day)", {
            "id": 3, "customer_id": 1, "box_id": 217, "frequency": "single",
            "start_date": "2026-11-24", "week_days": [2], "extras_one_off": False,
            "extras": [], "exclusions": [], "substitutions": [],
            "created_at": "2026-11-23T14:52:42Z", "active": True, "pause_date": None,
            "resume_date": None, "skipped_dates": [], "cancel_date": None,
            "updated_at": "2026-11-23T14:52:42Z"}),
    }),
    "links": {
        "GetOrder": order_link("getOrder", "Read the new order."),
        "ListOrders": {"operationId": "listOrders",
                       "parameters": {"customer_id": "$response.body#/customer_id"},
                       "description": "The customer's orders, this one included."},
        "UpdateOrder": order_link("updateOrder",
                                  "Change the new order: pause, skip, swap, cancel."),
        "ReplaceOrder": order_link("replaceOrder", "Change the new order with PUT."),
        "ListOrderDeliveries": order_link("listOrderDeliveries",
                                          "The new order's delivery dates."),
    },
}

paths["/v1/orders"] = {
    "get": op(
        "listOrders", "List a customer's orders",
        "Every order of one customer of the caller's webstore, in id order (not "
        "paginated). `customer_id` is required: missing or blank is `can't be blank`, "
        "anything else that is not a customer of the webstore is `is invalid` (422).",
        "Orders",
        {"200": {"description": "The customer's orders.", "headers": hdrs(),
                 "content": json_content({"type": "array", "items": sref("Order")},
                                         {"orders": ex("Orders", [ORDER_EX])})}},
        params=[{"name": "customer_id", "in": "query", "required": True,
                 "description": "A customer of the caller's webstore.",
                 "schema": {"type": "integer", "minimum": 1}, "example": 1}],
        unprocessable="QueryUnprocessable"),
    "post": op(
        "createOrder", "Create an order",
        "Orders one box (quantity 1) for a customer of the caller's webstore. Only "
        "`customer_id` and `box_id` are required; `frequency` defaults to `single`, "
        "`extras_one_off` to false, lists to empty, and the schedule (`start_date`, "
        "`week_days`) to the next delivery day of the customer's delivery service. "
        "Exclusions, substitutions and extras must fit the box's rules. Every failing "
        "field is reported at once. With `Idempotency-Key`, a repeat replays the first "
        "response. Writes are refused with 503 while the disk is nearly full.",
        "Orders",
        {"201": order_created},
        params=[p("IdempotencyKey")],
        body={
            "required": True,
            "description": "The order, bare or wrapped as `{\"order\": {...}}`. Unknown "
                           "fields are ignored. At most 64 KiB.",
            "content": json_content(sref("OrderCreateBody"), {
                "wrapped": ex("Weekly, without kale, with a juice", ORDER_CREATE_EX),
                "schedule": ex("Fortnightly on Tuesdays and Thursdays, ids as strings", {
                    "customer_id": "1", "box_id": "217", "frequency": "fortnightly",
                    "start_date": "2026-11-24", "week_days": [2, 4],
                    "extras_one_off": True, "substitutions": [244],
                    "extras": [{"id": 29, "quantity": 2}]}),
                "minimal": ex("Minimal", {"customer_id": 1, "box_id": 217}),
            }),
        },
        unprocessable="Unprocessable"),
}

order_update_desc = (
    "Changes an order of a customer of the caller's webstore: a pause (`pause_date`, "
    "`resume_date`), skipped dates, a cancellation (`active: false`, `cancel_date`) or "
    "taking it back (`active: true`), or its box, extras, exclusions, substitutions or "
    "schedule from `effective_date` on. Every change takes effect from the first "
    "delivery date after the webstore's cut-off (catalogue `cutoff`, default 18:00 three "
    "days before) or later; deliveries before keep what was in force then. Every failing "
    "field is reported at once, and a refused change changes nothing. A change that "
    "changes nothing writes nothing and makes no event. An order of another webstore is "
    "a 404. With `Idempotency-Key`, a repeat with the same body replays the first answer "
    "(`Idempotent-Replayed: true`). Each change makes an `order.updated` event. Writes "
    "are refused with 503 while the disk is nearly full.")
order_updated = {
    "description": "The order after the change (as `GET` answers it), and its `Location`.",
    "headers": hdrs("Location", "Idempotent-Replayed"),
    "content": json_content(sref("Order"), {"paused": ex("Paused", dict(
        ORDER_EX, pause_date="2026-12-22", resume_date="2027-01-05",
        updated_at="2026-12-01T09:30:00Z"))}),
    "links": {
        "GetOrder": order_link("getOrder", "Read the changed order: the same answer."),
        "ListOrderDeliveries": order_link("listOrderDeliveries",
                                          "The changed order's delivery dates."),
        "UpdateOrder": order_link("updateOrder", "Change it again."),
    },
}
order_update_body = {
    "required": True,
    "description": "The fields to change, bare or wrapped as `{\"order\": {...}}`. At most "
                   "64 KiB.",
    "content": json_content(sref("OrderUpdateBody"), {
        "pause": ex("A holiday", {"order": {"pause_date": "2026-12-22",
                                            "resume_date": "2027-01-05"}}),
        "skip": ex("Skip a week", {"order": {"skipped_dates": ["2026-12-29"]}}),
        "swap": ex("Another box from a date", {"order": {"box_id": 218,
                                                         "effective_date": "2026-12-08"}}),
        "cancel": ex("Cancel", {"order": {"active": False}}),
    }),
}

paths["/v1/orders/{id}"] = {
    "parameters": [p("OrderIdPath")],
    "get": op(
        "getOrder", "Get an order",
        "The order with this id, if its customer belongs to the caller's webstore.",
        "Orders", {"200": order_ok}, not_found=True),
    "patch": op(
        "updateOrder", "Change an order", order_update_desc, "Orders",
        {"200": order_updated}, params=[p("IdempotencyKey")], body=order_update_body,
        not_found=True, unprocessable="Unprocessable"),
    "put": op(
        "replaceOrder", "Change an order (PUT, same as PATCH)", order_update_desc, "Orders",
        {"200": order_updated}, params=[p("IdempotencyKey")], body=order_update_body,
        not_found=True, unprocessable="Unprocessable"),
}

paths["/v1/orders/{id}/deliveries"] = {
    "parameters": [p("OrderIdPath")],
    "get": op(
        "listOrderDeliveries", "An order's deliveries",
        "The dates from `from` to `to` (both included; default today in the webstore's "
        "zone and 8 weeks on; at most 366 days) on which the order is delivered, each with "
        "what goes out that day (the versions in force then) and whether its list is "
        "locked. Dates paused, skipped, cancelled or within a halt of the customer are "
        "left out. An order of another webstore is a 404.",
        "Orders",
        {"200": {"description": "The deliveries, by date.", "headers": hdrs(),
                 "content": json_content(
                     {"type": "array", "items": sref("OrderDelivery")},
                     {"deliveries": ex("Two deliveries", [
                         {"date": "2026-11-26", "box_id": 217,
                          "extras": [{"id": 28, "quantity": 1}], "exclusions": [243],
                          "substitutions": [], "locked": True, "price": "42.50",
                          "status": "delivered"},
                         {"date": "2026-12-03", "box_id": 217, "extras": [],
                          "exclusions": [243], "substitutions": [], "locked": False,
                          "price": "35.00", "status": "pending"}])})}},
        params=[
            {"name": "from", "in": "query", "required": False,
             "description": "`YYYY-MM-DD`; default today (`is invalid` if not a date).",
             "schema": {"type": "string"}},
            {"name": "to", "in": "query", "required": False,
             "description": "`YYYY-MM-DD`; default `from` + 55 days; not before `from`, "
                            "at most 366 days from it.",
             "schema": {"type": "string"}},
        ],
        not_found=True, unprocessable="QueryUnprocessable"),
}

paths["/v1/deliveries"] = {
    "get": op(
        "listDeliveries", "The delivery list of a date",
        "What the webstore packs on `date`: one entry per order delivered that day. "
        "Entries come by delivery service id, then customer number, then order id, "
        "paginated (`page`, `per_page`, `X-Total-Count`, `Link`). With `Accept: text/csv` "
        "the same page comes as CSV: a header row, then one row per entry with the lists "
        "as names joined by `; ` (extras as `name (unit) x quantity`) and the address "
        "in columns `address_1` … `work_phone`. `date` is required (`can't be blank`, "
        "`is invalid`); an unknown `delivery_service_id` is `is invalid`; all as 422.",
        "Deliveries",
        {"200": {
            "description": "One page of the delivery list, as JSON or (with "
                           "`Accept: text/csv`) CSV.",
            "headers": hdrs("X-Total-Count", "Link"),
            "content": {
                JSON: {"schema": {"type": "array", "items": sref("Delivery")},
                       "examples": {"list": ex("Deliveries", [DELIVERY_EX])}},
                "text/csv": {"schema": {"type": "string"},
                             "examples": {"csv": ex("Packing list", CSV_EX)}},
            },
        }},
        params=[
            {"name": "date", "in": "query", "required": True,
             "description": "The delivery date, `YYYY-MM-DD`.",
             "schema": {"type": "string", "format": "date"}, "example": "2026-11-24"},
            {"name": "delivery_service_id", "in": "query", "required": False,
             "description": "Only this delivery service's deliveries. Empty (a form's "
                            "unset field, `delivery_service_id=`) is the same as not given: "
                            "every delivery service.",
             "schema": {"anyOf": [{"type": "integer", "minimum": 1},
                                  {"type": "string", "maxLength": 0}]}, "example": 91},
            p("Page"), p("PerPage"),
        ],
        unprocessable="QueryUnprocessable"),
}

paths["/v1/boxes"] = {
    "get": op(
        "listBoxes", "List boxes",
        "The caller's webstore's boxes, hidden ones left out, in id order.",
        "Catalogue",
        {"200": {"description": "The boxes.", "headers": hdrs(),
                 "content": json_content({"type": "array", "items": sref("Box")}, {
                     "plain": ex("Without embed", [BOX_EX]),
                     "embedded": ex("With ?embed=extras,box_items,images",
                                    [BOX_EMBED_EX])})}},
        params=[p("BoxEmbed")]),
}
paths["/v1/boxes/{id}"] = {
    "parameters": [p("BoxIdPath")],
    "get": op(
        "getBox", "Get a box",
        "A visible box of the caller's webstore (hidden, unknown or another webstore's: "
        "404).",
        "Catalogue",
        {"200": {"description": "The box.", "headers": hdrs(),
                 "content": json_content(sref("Box"), {"box": ex("Box 217", BOX_EX)})}},
        params=[p("BoxEmbed")], not_found=True),
}
paths["/v1/delivery_services"] = {
    "get": op(
        "listDeliveryServices", "List delivery services",
        "The caller's webstore's delivery services, in id order.",
        "Catalogue",
        {"200": {"description": "The delivery services.", "headers": hdrs(),
                 "content": json_content({"type": "array", "items": sref("DeliveryService")},
                                         {"list": ex("Delivery services", [DS_EX, DS2_EX])})}}),
}
paths["/v1/delivery_services/{id}"] = {
    "parameters": [p("DeliveryServiceIdPath")],
    "get": op(
        "getDeliveryService", "Get a delivery service",
        "A delivery service of the caller's webstore.",
        "Catalogue",
        {"200": {"description": "The delivery service.", "headers": hdrs(),
                 "content": json_content(sref("DeliveryService"),
                                         {"courier": ex("Service 91", DS_EX)})}},
        not_found=True),
}
paths["/v1/webstore"] = {
    "get": op(
        "getWebstore", "The caller's webstore",
        "The public settings of the webstore the credentials belong to, including which "
        "address fields customers must give.",
        "Catalogue",
        {"200": {"description": "The webstore.", "headers": hdrs(),
                 "content": json_content(sref("Webstore"),
                                         {"demo": ex("Demo webstore", WEBSTORE_EX)})}}),
}

NAME_RE = "(?:customer\\.created|customer\\.updated|order\\.created)"
TYPE_ITEM_RE = f"\\s*(?:{NAME_RE}\\s*)?"

paths["/v1/events"] = {
    "get": op(
        "listEvents", "The events feed",
        "The caller's webstore's events after the cursor `after` (without it, from the "
        "oldest event kept), oldest first, at most `limit` (1 to 1000, default 100), "
        "only of the types in `type` if given. Every write of the API makes one event, "
        "written in the same durable write as the change: `customer.created`, "
        "`customer.updated`, `order.created`, `order.updated`. A page shows only events whose writes are "
        "durable, and no event ever appears later below a position already read. A page "
        "looks at no more than 2000 events of any type: one whose `type` matches few of "
        "them may end with fewer than `limit` events (none, even) and `has_more`. Ask "
        "again with the answer's `next` (also in `Link`): at once while `has_more` is "
        "true; when it is false, the page is the end for now. Cursors stay "
        "good across restarts, failovers and moves between shards. Events are kept 30 "
        "days (the operator may set another retention): a cursor whose next events were "
        "removed is a 410, as is another webstore's. A malformed parameter is a 422 naming "
        "each.",
        "Events",
        {"200": {
            "description": "A page of events, and the cursor to ask with next.",
            "headers": dict(hdrs(), Link=ref("headers", "EventsLink")),
            "content": json_content(sref("EventsPage"), {
                "page": ex("Three events", {
                    "events": [CUSTOMER_CREATED_EVENT_EX, CUSTOMER_UPDATED_EVENT_EX,
                               ORDER_CREATED_EVENT_EX],
                    "next": CURSOR_EX, "has_more": False}),
                "empty": ex("Nothing new yet", {"events": [], "next": CURSOR_EX,
                                                "has_more": False}),
                "scanned": ex("2000 events looked at, none of the types asked for", {
                    "events": [], "next": CURSOR_EX, "has_more": True}),
            }),
            "links": {
                "NextPage": {"operationId": "listEvents",
                             "parameters": {"after": "$response.body#/next"},
                             "description": "The events after this page."},
            },
        }, "410": r("Gone")},
        params=[
            {"name": "after", "in": "query", "required": False,
             "description": "A cursor: the `next` of an earlier page. Without it, the feed "
                            "starts at the oldest event kept. A string this service did not "
                            "give out is a 422 `is invalid`; one given to another webstore, "
                            "or one the retention has passed, a 410.",
             "schema": {"type": "string"}, "example": CURSOR_EX},
            {"name": "type", "in": "query", "required": False,
             "description": "Only events of these types: names from `customer.created`, "
                            "`customer.updated`, `order.created`, `order.updated`, "
                            "comma-separated. Spaces "
                            "around a name and empty names are ignored; without any, every "
                            "type. An unknown name is a 422 `is not included in the list`.",
             "schema": {"type": "string", "pattern": f"^{TYPE_ITEM_RE}(?:,{TYPE_ITEM_RE})*$"},
             "example": "order.created,customer.created"},
            {"name": "limit", "in": "query", "required": False,
             "description": "The most events in the page, 1 to 1000 (`must be an integer`, "
                            "`must be between 1 and 1000`).",
             "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}},
        ],
        unprocessable="EventsQueryUnprocessable"),
}

# ---------------------------------------------------------------------------
# Webhooks: what boxsub sends to a webstore's endpoints
# ---------------------------------------------------------------------------

WEBHOOK_PARAMS = [
    {"name": "webhook-id", "in": "header", "required": True,
     "description": "The event's `id`: the same on every attempt of one event. Deduplicate "
                    "on it: an event may arrive more than once.",
     "schema": {"type": "string", "pattern": "^evt_[0-9a-f]{32}$"},
     "example": ORDER_CREATED_EVENT_EX["id"]},
    {"name": "webhook-timestamp", "in": "header", "required": True,
     "description": "When this attempt was sent, in Unix seconds (each attempt has its own). "
                    "Refuse a delivery whose timestamp is more than 5 minutes from your "
                    "clock.",
     "schema": {"type": "string", "pattern": "^[0-9]+$"}, "example": "1795445562"},
    {"name": "webhook-signature", "in": "header", "required": True,
     "description": (
         "One signature per secret of the endpoint (two during a rotation), separated by "
         "spaces, each `v1,` and the base64 (standard, padded) of the HMAC-SHA256 of "
         "`{webhook-id}.{webhook-timestamp}.{body}` keyed with the secret's bytes (the "
         "base64 after `whsec_`, decoded), over the body exactly as received. Accept the "
         "delivery when one of them matches, compared in constant time."),
     "schema": {"type": "string", "pattern": "^v1,[A-Za-z0-9+/]{43}=( v1,[A-Za-z0-9+/]{43}=)*$"},
     "example": SIGNATURE_EX},
]

RECEIVER_RETRY_AFTER = {
    "description": "How long to wait: seconds, or an HTTP date. At most 6 hours is "
                   "honoured. Without one (or with one that can't be read), the retry "
                   "schedule applies.",
    "schema": {"type": "string"},
}

WEBHOOK_RESPONSES = {
    "2XX": {"description": "Delivered. The answer's body is not read. The endpoint's next "
                           "event follows."},
    "410": {"description": "Gone: the endpoint is disabled. Nothing more is sent to it until "
                           "the operator redelivers, which enables it again."},
    "429": {"description": "Asked to wait: the same event is sent again after `Retry-After`, "
                           "or with the retries' backoff without one.",
            "headers": {"Retry-After": RECEIVER_RETRY_AFTER}},
    "503": {"description": "Unavailable: as 429.",
            "headers": {"Retry-After": RECEIVER_RETRY_AFTER}},
    "default": {"description": (
        "Any other answer (a 3xx: redirects are not followed; another 4xx; a 5xx), no answer "
        "within 10 s, or no connection: the same event is sent again after 5 s, 20 s, 80 s, "
        "5 min 20 s, ... (four times longer each time, at most 6 hours, each ±20%) until it "
        "has failed for 3 days (the operator may change both); then the endpoint is "
        "disabled until the operator redelivers.")},
}


# ---------------------------------------------------------------------------
# A customer's account: its balance, ledger and payments, and the writes that move money
# ---------------------------------------------------------------------------

schemas["Account"] = closed(
    {
        "customer_id": ID,
        "balance": dict(SIGNED_MONEY, description="The sum of the account's transactions."),
        "currency": {"type": "string", "description": "The webstore's ISO currency code."},
        "discount": {"type": "number", "minimum": 0, "maximum": 1,
                     "description": "The customer's discount on box and extras, at most four "
                                    "decimals."},
        "balance_threshold": {"oneOf": [SIGNED_MONEY, {"type": "null"}],
                              "description": "The customer's own spend limit, or null (the "
                                             "webstore's)."},
        "halted_by_balance": {"type": "boolean",
                              "description": "Whether the balance is at or below the spend "
                                             "limit in force."},
        "updated_at": {"type": "string", "format": "date-time"},
    },
    description="A customer's account: its balance is the sum of its transactions and is "
                "never set directly.",
)
schemas["Transaction"] = closed(
    {
        "id": dict(ID, description="Unique across the service."),
        "customer_id": ID,
        "number": dict(ID, description="Its place in the account's ledger, from 1."),
        "amount": dict(SIGNED_MONEY, description="What it added to the balance."),
        "balance": dict(SIGNED_MONEY, description="The balance after it."),
        "kind": {"type": "string", "enum": ["charge", "charge_reversal", "payment",
                                            "payment_reversal", "adjustment"]},
        "description": {"type": "string"},
        "date": DATE,
        "created_at": {"type": "string", "format": "date-time"},
        "order_id": dict(ID, description="The order whose delivery it is of (a charge)."),
        "payment_id": dict(ID, description="The payment it is of (a payment, a reversal)."),
    },
    required=["id", "customer_id", "number", "amount", "balance", "kind", "description",
              "date", "created_at"],
    description="One entry of an account's ledger; never changed once posted.",
)
schemas["TransactionsPage"] = closed(
    {
        "transactions": {"type": "array", "items": sref("Transaction")},
        "next": {"type": "integer", "minimum": 0,
                 "description": "The number to pass as `after` for the next page."},
        "has_more": {"type": "boolean"},
    },
    description="A page of a ledger, oldest first.",
)
schemas["Payment"] = closed(
    {
        "id": dict(ID, description="Unique across the service."),
        "customer_id": ID,
        "amount": MONEY,
        "method": {"type": "string", "enum": ["bank_transfer", "credit_card", "cash",
                                              "delivery", "unspecified"]},
        "description": {"type": ["string", "null"]},
        "reference": {"type": ["string", "null"]},
        "date": DATE,
        "reversed": {"type": "boolean"},
        "transaction_id": dict(ID, description="Its `payment` transaction."),
        "reversal_transaction_id": {"oneOf": [ID, {"type": "null"}],
                                    "description": "Its `payment_reversal` transaction, once "
                                                   "reversed."},
        "created_at": {"type": "string", "format": "date-time"},
    },
    description="A payment received, credited to the customer's account.",
)
AMOUNT_IN = {"oneOf": [{"type": "string"}, {"type": "number"}],
             "description": "A decimal string or a JSON number with at most two decimals, "
                            "read exactly from its text (`12.50`, `\"12.50\"`); anything "
                            "else is `is invalid`."}
schemas["PaymentBody"] = {
    "type": "object",
    "properties": {
        "amount": AMOUNT_IN,
        "method": {"type": "string", "enum": ["bank_transfer", "credit_card", "cash",
                                              "delivery", "unspecified"],
                   "default": "unspecified"},
        "description": {"type": ["string", "null"], "maxLength": 255},
        "reference": {"type": ["string", "null"], "maxLength": 255},
        "date": dict(DATE, description="The date it was paid; default today in the "
                                       "webstore's zone."),
    },
    "required": ["amount"],
    "description": "A payment, bare or wrapped as `{\"payment\": {...}}`. A field not "
                   "named here is `is not a field of this request`.",
}
schemas["AccountSettingsBody"] = {
    "type": "object",
    "properties": {
        "discount": {"oneOf": [{"type": "number", "minimum": 0, "maximum": 1},
                               {"type": "string"}],
                     "description": "A fraction from 0 to 1 with at most four decimals "
                                    "(`0.1`, `\"0.125\"`), read exactly from its text."},
        "balance_threshold": {"oneOf": [AMOUNT_IN, {"type": "null"}],
                              "description": "The customer's spend limit, or null for the "
                                             "webstore's. " + AMOUNT_IN["description"]},
    },
    "description": "An account's settings, bare or wrapped as `{\"account\": {...}}`. A "
                   "field not named here is `is not a field of this request`.",
}
schemas["AdjustmentBody"] = {
    "type": "object",
    "properties": {
        "amount": dict(AMOUNT_IN, description="Signed and not 0: what it adds to the balance. "
                                              + AMOUNT_IN["description"]),
        "description": {"type": "string", "minLength": 1, "maxLength": 255},
        "date": dict(DATE, description="Default today in the webstore's zone."),
    },
    "required": ["amount", "description"],
    "description": "A correction of the balance, bare or wrapped as `{\"adjustment\": "
                   "{...}}`.",
}
parameters["PaymentIdPath"] = path_id("payment")
parameters["MoneyIdempotencyKey"] = dict(
    parameters["IdempotencyKey"], required=True,
    description="Required on every write that moves money (without it, 428): a retry with "
                "the same key and body after a lost answer replays the first answer and "
                "posts nothing again. " + parameters["IdempotencyKey"]["description"])
responses["IdempotencyKeyRequired"] = {
    "description": "A write that moves money came without an `Idempotency-Key`. Nothing "
                   "was changed.",
    "headers": hdrs(),
    "content": json_content(sref("Message"), msg_ex(
        ("key_required", "A write that moves money needs an Idempotency-Key header, so that "
                         "a retry after a lost answer is made once. Nothing was changed; "
                         "send it again with a key of your own (the same key for each retry "
                         "of the same request)."))),
}

ACCOUNT_EX = {"customer_id": 1, "balance": "-12.50", "currency": "NZD", "discount": 0.0,
              "balance_threshold": None, "halted_by_balance": False,
              "updated_at": "2026-12-01T09:30:00Z"}
PAYMENT_EX = {"id": 1099511627777, "customer_id": 1, "amount": "25.00", "method": "cash",
              "description": "At the door", "reference": None, "date": "2026-12-01",
              "reversed": False, "transaction_id": 1099511627778,
              "reversal_transaction_id": None, "created_at": "2026-12-01T09:30:00Z"}
TRANSACTION_EX = {"id": 1099511627778, "customer_id": 1, "number": 1, "amount": "25.00",
                  "balance": "25.00", "kind": "payment", "description": "At the door",
                  "date": "2026-12-01", "created_at": "2026-12-01T09:30:00Z",
                  "payment_id": 1099511627777}


PAYMENT_CREATED_EVENT_EX = {
    "id": "evt_3b1f0c2d4e5a69788796a5b4c3d2e1f0", "type": "payment.created",
    "sequence": 5, "created_at": "2026-12-01T09:30:00.000Z", "data": PAYMENT_EX,
}
PAYMENT_REVERSED_EVENT_EX = {
    "id": "evt_4c2a1d3e5f6b7a8998a7b6c5d4e3f201", "type": "payment.reversed",
    "sequence": 6, "created_at": "2026-12-02T10:00:00.000Z",
    "data": dict(PAYMENT_EX, reversed=True, reversal_transaction_id=1099511627779),
}
TRANSACTION_CREATED_EVENT_EX = {
    "id": "evt_5d3b2e4f6a7c8b9aa9b8c7d6e5f40312", "type": "transaction.created",
    "sequence": 7, "created_at": "2026-12-02T10:05:00.000Z",
    "data": {k: v for k, v in dict(TRANSACTION_EX, number=3, kind="adjustment",
                                   amount="5.00", balance="5.00",
                                   description="Damaged box").items() if k != "payment_id"},
}
schemas["MarkedDelivery"] = closed(
    {
        "order_id": ID,
        "customer_id": ID,
        "date": DATE,
        "status": DELIVERY_STATUS,
        "price": DELIVERY_PRICE,
        "note": {"type": ["string", "null"], "description": "What the driver or the "
                                                            "producer noted."},
        "transaction": {"oneOf": [sref("Transaction"), {"type": "null"}],
                        "description": "The charge or charge reversal this mark posted, "
                                       "if it moved the account."},
    },
    required=["order_id", "customer_id", "date", "status", "price", "note"],
    description="A frozen delivery after a mark (by the producer, or by the charging run "
                "at the webstore's `delivered_at`).",
)
MARKED_DELIVERY_EX = {"order_id": 1099511627780, "customer_id": 1, "date": "2026-12-01",
                      "status": "delivered", "price": "42.50", "note": None,
                      "transaction": {k: v for k, v in dict(
                          TRANSACTION_EX, id=1099511627781, number=2, kind="charge",
                          amount="-42.50", balance="-17.50", description="Delivery on 2026-12-01",
                          order_id=1099511627780).items() if k != "payment_id"}}
DELIVERY_UPDATED_EVENT_EX = {
    "id": "evt_6e4c3f5a7b8d9cabbac9d8e7f6051423", "type": "delivery.updated",
    "sequence": 8, "created_at": "2026-12-01T23:00:00.000Z", "data": MARKED_DELIVERY_EX,
}
MONEY_EVENTS = [
    ("payment.created", "PaymentCreatedEvent", "paymentCreatedWebhook",
     dict(sref("Payment"), description="The payment as `GET /v1/payments/{id}` answers it."),
     "`POST /v1/customers/{id}/payments`", PAYMENT_CREATED_EVENT_EX),
    ("payment.reversed", "PaymentReversedEvent", "paymentReversedWebhook",
     dict(sref("Payment"), description="The payment, reversed."),
     "`POST /v1/payments/{id}/reversal`", PAYMENT_REVERSED_EVENT_EX),
    ("transaction.created", "TransactionCreatedEvent", "transactionCreatedWebhook",
     dict(sref("Transaction"), description="The transaction posted."),
     "`POST /v1/customers/{id}/adjustments`", TRANSACTION_CREATED_EVENT_EX),
    ("delivery.updated", "DeliveryUpdatedEvent", "deliveryUpdatedWebhook",
     dict(sref("MarkedDelivery"), description="The delivery after its new status."),
     "`PUT /v1/orders/{id}/deliveries/{date}` and the charging run at `delivered_at`",
     DELIVERY_UPDATED_EVENT_EX),
]
for kind, name, _, data, made_by, example in MONEY_EVENTS:
    schemas[name] = event(kind, data, made_by, {k: v for k, v in example.items()})
    schemas["Event"]["oneOf"].append(sref(name))
    schemas["Event"]["discriminator"]["mapping"][kind] = f"#/components/schemas/{name}"


def money_op(op_id, summary, description, ok, body):
    o = op(op_id, summary, description, "Accounts", ok,
           params=[p("MoneyIdempotencyKey")], body=body, not_found=True,
           unprocessable="Unprocessable")
    o["responses"]["428"] = r("IdempotencyKeyRequired")
    o["responses"] = dict(sorted(o["responses"].items()))
    return o


paths["/v1/customers/{id}/account"] = {
    "parameters": [p("CustomerIdPath")],
    "get": op(
        "getAccount", "A customer's account",
        "The balance (the sum of the account's transactions), the currency, the discount, "
        "the spend limit and whether the balance halts the customer.",
        "Accounts",
        {"200": {"description": "The account.", "headers": hdrs(),
                 "content": json_content(sref("Account"),
                                         {"account": ex("An account", ACCOUNT_EX)})}},
        not_found=True),
    "patch": op(
        "setAccount", "Set a customer's discount and spend limit",
        "Sets the customer's `discount` (a fraction from 0 to 1, at most four decimals; a "
        "delivery's price takes it from the next date to lock) and `balance_threshold` (an "
        "amount, or null for the webstore's). Absent fields keep their value; `balance` is "
        "refused (only transactions move it). `halted_by_balance` follows the threshold now "
        "in force. Every failing field is named at once; a refusal changes nothing. A "
        "change is a `customer.updated` event. Setting the same values twice changes "
        "nothing, so no `Idempotency-Key` is needed.",
        "Accounts",
        {"200": {"description": "The account as it is now.", "headers": hdrs(),
                 "content": json_content(sref("Account"), {"account": ex(
                     "A discount and a limit", dict(ACCOUNT_EX, discount=0.1,
                                                    balance_threshold="-20.00"))})}},
        body={"required": True, "description": "The settings. At most 64 KiB.",
              "content": json_content(sref("AccountSettingsBody"), {
                  "both": ex("Both", {"account": {"discount": 0.1,
                                                  "balance_threshold": "-20.00"}}),
                  "webstore_s": ex("Back to the webstore's limit",
                                   {"balance_threshold": None})})},
        not_found=True, unprocessable="Unprocessable"),
}
paths["/v1/customers/{id}/transactions"] = {
    "parameters": [p("CustomerIdPath")],
    "get": op(
        "listTransactions", "A customer's ledger",
        "The account's transactions oldest first, a page at a time: those numbered after "
        "`after` (default 0), at most `limit` (1 to 500, default 100). Pass `next` as "
        "`after` for the next page while `has_more`. Only durable transactions are listed.",
        "Accounts",
        {"200": {"description": "A page of the ledger.", "headers": hdrs(),
                 "content": json_content(sref("TransactionsPage"), {
                     "page": ex("One payment", {"transactions": [TRANSACTION_EX],
                                                "next": 1, "has_more": False})})}},
        params=[
            {"name": "after", "in": "query", "required": False,
             "description": "A transaction number; default 0.",
             "schema": {"type": "integer", "minimum": 0}},
            {"name": "limit", "in": "query", "required": False,
             "description": "1 to 500; default 100.",
             "schema": {"type": "integer", "minimum": 1, "maximum": 500}},
        ],
        not_found=True, unprocessable="QueryUnprocessable"),
}
BOOKS_CSV_EX = (
    "date,id,customer_id,number,kind,amount,balance,description,order_id,payment_id,"
    "created_at\n"
    "2026-12-01,1099511627778,1,1,payment,25.00,25.00,At the door,,1099511627777,"
    "2026-12-01T09:30:00Z\n"
    "2026-12-01,1099511627781,1,2,charge,-42.50,-17.50,Delivery on 2026-12-01,1099511627780,,"
    "2026-12-01T23:00:00Z\n"
)
paths["/v1/transactions"] = {
    "get": op(
        "listBooks", "The webstore's books",
        "Every transaction of the webstore's customers dated from `from` to `to` (both "
        "included; default today in the webstore's zone, `to` default `from`; at most 366 "
        "days), by date and then id, paginated (`page`, `per_page`, `X-Total-Count`, "
        "`Link`): for the producer's accounts. With `Accept: text/csv` the same page comes "
        "as CSV, one row per transaction. Only durable transactions are listed. A bad "
        "parameter is a 422 naming it, all of them at once.",
        "Accounts",
        {"200": {
            "description": "One page of the books, as JSON or (with `Accept: text/csv`) CSV.",
            "headers": hdrs("X-Total-Count", "Link"),
            "content": {
                JSON: {"schema": {"type": "array", "items": sref("Transaction")},
                       "examples": {"list": ex("A payment", [TRANSACTION_EX])}},
                "text/csv": {"schema": {"type": "string"},
                             "examples": {"csv": ex("A day's books", BOOKS_CSV_EX)}},
            },
        }},
        params=[
            {"name": "from", "in": "query", "required": False,
             "description": "`YYYY-MM-DD`; default today (`is invalid` if not a date).",
             "schema": {"type": "string"}},
            {"name": "to", "in": "query", "required": False,
             "description": "`YYYY-MM-DD`; default `from`; not before `from`, at most 366 "
                            "days from it.",
             "schema": {"type": "string"}},
            p("Page"), p("PerPage"),
        ],
        unprocessable="QueryUnprocessable"),
}
paths["/v1/customers/{id}/payments"] = {
    "parameters": [p("CustomerIdPath")],
    "get": op(
        "listPayments", "A customer's payments",
        "Every payment of the customer, in id order, reversed ones included.",
        "Accounts",
        {"200": {"description": "The payments.", "headers": hdrs(),
                 "content": json_content({"type": "array", "items": sref("Payment")},
                                         {"payments": ex("A payment", [PAYMENT_EX])})}},
        not_found=True),
    "post": money_op(
        "createPayment", "Record a payment",
        "Credits the customer's account with a payment received: a `payment` transaction "
        "of its amount (above 0). `method` defaults to `unspecified`, `date` to today in "
        "the webstore's zone. Every failing field is named at once; a refusal changes "
        "nothing. An `Idempotency-Key` is required.",
        {"201": {"description": "Recorded. `Location` names the payment.",
                 "headers": hdrs("Location", "Idempotent-Replayed"),
                 "content": json_content(sref("Payment"), {"payment": ex("Cash", PAYMENT_EX)})}},
        {"required": True, "description": "The payment. At most 64 KiB.",
         "content": json_content(sref("PaymentBody"), {
             "wrapped": ex("Cash at the door", {"payment": {"amount": "25.00",
                                                             "method": "cash",
                                                             "description": "At the door"}}),
             "number": ex("A number", {"amount": 12.5})})}),
}
paths["/v1/customers/{id}/adjustments"] = {
    "parameters": [p("CustomerIdPath")],
    "post": money_op(
        "createAdjustment", "Adjust a balance",
        "Corrects the customer's balance by a signed, non-zero amount, with a description "
        "(required): an `adjustment` transaction. An `Idempotency-Key` is required.",
        {"201": {"description": "Posted. `Location` names the account.",
                 "headers": hdrs("Location", "Idempotent-Replayed"),
                 "content": json_content(sref("Transaction"), {"adjustment": ex(
                     "A credit", {k: v for k, v in dict(
                         TRANSACTION_EX, kind="adjustment", amount="5.00", balance="5.00",
                         description="Damaged box").items() if k != "payment_id"})})}},
        {"required": True, "description": "The adjustment. At most 64 KiB.",
         "content": json_content(sref("AdjustmentBody"), {
             "credit": ex("A credit", {"adjustment": {"amount": "5.00",
                                                      "description": "Damaged box"}})})}),
}
paths["/v1/payments/{id}"] = {
    "parameters": [p("PaymentIdPath")],
    "get": op(
        "getPayment", "Get a payment",
        "The payment with this id, if its customer belongs to the caller's webstore.",
        "Accounts",
        {"200": {"description": "The payment.", "headers": hdrs(),
                 "content": json_content(sref("Payment"), {"payment": ex("A payment",
                                                                          PAYMENT_EX)})}},
        not_found=True),
}
paths["/v1/payments/{id}/reversal"] = {
    "parameters": [p("PaymentIdPath")],
    "post": money_op(
        "reversePayment", "Reverse a payment",
        "Reverses the payment once: a `payment_reversal` transaction of minus its amount. "
        "A payment already reversed is a 422 naming `payment`. The body is empty or an "
        "empty object. An `Idempotency-Key` is required.",
        {"200": {"description": "The payment, reversed. `Location` names it.",
                 "headers": hdrs("Location", "Idempotent-Replayed"),
                 "content": json_content(sref("Payment"), {"reversed": ex(
                     "Reversed", dict(PAYMENT_EX, reversed=True,
                                      reversal_transaction_id=1099511627779))})}},
        {"required": False, "description": "Nothing, or `{}`.",
         "content": json_content({"type": "object", "additionalProperties": False})}),
}

schemas["DeliveryMarkBody"] = {
    "type": "object",
    "properties": {
        "status": {"type": "string", "enum": ["delivered", "not_delivered"]},
        "note": {"type": ["string", "null"], "maxLength": 255,
                 "description": "Kept with the delivery; absent keeps the one it has."},
    },
    "required": ["status"],
    "description": "A mark, bare or wrapped as `{\"delivery\": {...}}`. A field not named "
                   "here is `is not a field of this request`.",
}
parameters["DeliveryDatePath"] = {
    "name": "date", "in": "path", "required": True,
    "description": "The delivery's date, `YYYY-MM-DD` (anything else is a 422 naming "
                   "`date`).",
    "schema": {"type": "string"},
}
paths["/v1/orders/{id}/deliveries/{date}"] = {
    "parameters": [p("OrderIdPath"), p("DeliveryDatePath")],
    "put": op(
        "markDelivery", "Mark a delivery delivered or not",
        "Marks the order's frozen delivery of `date` (from its date's cut-off on). "
        "`not_delivered` after a charge reverses it (a `charge_reversal`), `delivered` "
        "again charges it again (a `charge` of minus its frozen price); a mark already in "
        "force changes nothing and is answered the same. A date not yet locked is a 422 "
        "naming `date` (`is not locked yet`), as is a date the order is not delivered on "
        "(`is not a delivery of this order`). Every failing field is named at once; a "
        "refusal changes nothing. A `delivery.updated` event follows each change. "
        "Setting a status twice is harmless, so no `Idempotency-Key` is needed.",
        "Orders",
        {"200": {"description": "The delivery as it is now.", "headers": hdrs(),
                 "content": json_content(sref("MarkedDelivery"), {
                     "delivered": ex("Delivered and charged", MARKED_DELIVERY_EX)})}},
        body={"required": True, "description": "The mark. At most 64 KiB.",
              "content": json_content(sref("DeliveryMarkBody"), {
                  "not_delivered": ex("Not delivered", {"delivery": {
                      "status": "not_delivered", "note": "Nobody home, gate locked"}})})},
        not_found=True, unprocessable="Unprocessable"),
}


def webhook(kind, op_id, schema, example):
    return {"post": {
        "operationId": op_id,
        "summary": f"`{kind}` sent to a webhook endpoint",
        "description": (
            f"Sent to each endpoint of the webstore's `webhooks` (in the catalogue, kept by "
            f"the operator) whose `events` include `{kind}`, once the write is durable: a "
            "`POST` to the endpoint's URL with the event as the body, exactly as the feed "
            "shows it (`Content-Type: application/json`, `User-Agent: "
            "boxsub-webhooks/VERSION`), signed per Standard Webhooks. At least once, and in "
            "order per endpoint: the endpoint's next event is sent only once this one got a "
            "2xx. So an event may arrive twice (after a restart, a failover, or an answer "
            "that was lost): deduplicate on `webhook-id`. Verify the signature over the raw "
            "body before parsing it. A new endpoint gets the events made from when the "
            "server loads the catalogue that adds it."),
        "tags": ["Events"],
        "security": [],
        "parameters": WEBHOOK_PARAMS,
        "requestBody": {
            "required": True,
            "description": "The event, compact JSON in UTF-8.",
            "content": json_content(sref(schema), {"event": ex(f"A `{kind}` event", example)}),
        },
        "responses": WEBHOOK_RESPONSES,
    }}


webhooks = {
    "customer.created": webhook("customer.created", "customerCreatedWebhook",
                                "CustomerCreatedEvent", CUSTOMER_CREATED_EVENT_EX),
    "customer.updated": webhook("customer.updated", "customerUpdatedWebhook",
                                "CustomerUpdatedEvent", CUSTOMER_UPDATED_EVENT_EX),
    "order.created": webhook("order.created", "orderCreatedWebhook",
                             "OrderCreatedEvent", ORDER_CREATED_EVENT_EX),
    "order.updated": webhook("order.updated", "orderUpdatedWebhook",
                             "OrderUpdatedEvent", ORDER_UPDATED_EVENT_EX),
}
for kind, name, op_id, _, _, example in MONEY_EVENTS:
    webhooks[kind] = webhook(kind, op_id, name, example)

DESCRIPTION = """\
boxsub is a box-subscription ordering service. Shopping carts push customers and orders into \
it; producers (webstores) run their box deliveries from it. Each webstore is a tenant: its \
API key pair selects it, and no webstore ever sees another's data.

**Authentication.** Every request under `/v1` except `GET /v1/ping` and \
`GET /v1/openapi.json` needs both headers `API-Key` and `API-Secret`. They are checked \
before anything else: a request without valid ones is a 401 whatever its path, method or body.

**Conventions.** Bodies and answers are JSON (`application/json; charset=utf-8`). A request \
body must be a JSON object (422 `{"message":"Invalid JSON"}` otherwise), bare or wrapped \
as `{"customer": {...}}` / `{"order": {...}}`; unknown fields are ignored. Ids and other \
integers in bodies may be JSON numbers or strings of digits. Request bodies are limited to \
64 KiB (413 past it, announced or chunked). A body that does not arrive within 20 s is a \
408. Paths are matched before methods: an unknown path (or an id that is not a positive \
integer) is a 404, a known path with another method a 405 with `Allow`. A trailing slash \
is accepted. Every response carries `X-Request-Id`.

**Errors.** `{"message": "..."}`, or for validation failures (422) \
`{"errors": {"field": ["message", ...]}}` naming every failing field at once. A request \
that fails changes nothing. 503 (with `Retry-After`) means overloaded, past its deadline, \
a failed store, or a nearly full disk (writes only); nothing was changed.

**Pagination.** `GET /v1/customers` (without `email`) and `GET /v1/deliveries` take \
`page` (from 1, default 1) and `per_page` (1 to 1000, default 100) and answer with \
`X-Total-Count` (all elements) and an RFC 8288 `Link` header (`next`, `prev`, `first`, \
`last`). A page past the last is an empty array.

**Idempotency.** `POST /v1/customers`, `POST /v1/orders` and `PATCH`/`PUT \
/v1/orders/{id}` take an `Idempotency-Key` (1 to 255 characters): the same key with the \
same body bytes replays the first answer with `Idempotent-Replayed: true`.

**Sign-in throttle.** 10 failed sign-ins for one email within 15 minutes make further \
attempts a 429 with `Retry-After`.

**Events.** Every write makes one event, in the same durable write as the change \
(`customer.created`, `customer.updated`, `order.created`, `order.updated`), holding the resource as `GET` \
returns it. `GET /v1/events` pages through them, oldest first, after a cursor (`after`: the \
`next` of the previous page). Events are kept 30 days unless the operator sets another \
time; a cursor past that is a 410. The webstore's webhook endpoints (set by the operator in \
the catalogue) are sent each event they subscribe to as a `POST` signed per Standard \
Webhooks (see `webhooks`): at least once, in order per endpoint, retried for 3 days; \
deduplicate on `webhook-id`.

A human reference is `docs/api.md` in the repository."""

doc = {
    "openapi": "3.1.0",
    "info": {
        "title": "boxsub",
        "version": "1",
        "description": DESCRIPTION,
    },
    "servers": [{"url": "http://127.0.0.1:3000"}],
    "tags": [
        {"name": "Service", "description": "Health check and this document."},
        {"name": "Customers", "description": "Customers, their addresses and sign-in."},
        {"name": "Orders", "description": "Box orders and their schedules."},
        {"name": "Deliveries", "description": "The delivery list of a date."},
        {"name": "Accounts", "description": "Each customer's account: its balance, ledger "
                                            "and payments, and the writes that move money."},
        {"name": "Catalogue", "description": "Boxes, delivery services and the webstore."},
        {"name": "Events", "description": "What the writes changed: the events feed and "
                                          "the webhooks."},
    ],
    "security": AUTH,
    "paths": paths,
    "webhooks": webhooks,
    "components": {
        "securitySchemes": {
            "ApiKey": {"type": "apiKey", "in": "header", "name": "API-Key",
                       "description": "The webstore's API key. Always sent together with "
                                      "`API-Secret`."},
            "ApiSecret": {"type": "apiKey", "in": "header", "name": "API-Secret",
                          "description": "The secret of the API key."},
        },
        "schemas": schemas,
        "parameters": parameters,
        "headers": headers,
        "responses": responses,
    },
}

# Every answer an authenticated request may get once its quotas have been counted carries
# the quota fields: the answers of authenticated operations, and the shared responses they
# use (not 401, 421 or 431, given before a webstore is known).
QUOTA_FIELDS = {"RateLimit-Policy": ref("headers", "RateLimit-Policy"),
                "RateLimit": ref("headers", "RateLimit")}
for name, response in responses.items():
    if name not in ("Unauthorized", "Misdirected", "HeadTooLarge"):
        response.setdefault("headers", hdrs()).update(
            {k: v for k, v in QUOTA_FIELDS.items() if k not in response.get("headers", {})})
for path_item in paths.values():
    for operation in path_item.values():
        if not isinstance(operation, dict) or operation.get("security") == []:
            continue
        for status, response in operation.get("responses", {}).items():
            if "$ref" not in response:
                response.setdefault("headers", hdrs()).update(QUOTA_FIELDS)

with open(OUT, "w", encoding="utf-8") as f:
    json.dump(doc, f, indent=2, ensure_ascii=False)
    f.write("\n")
