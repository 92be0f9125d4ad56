"""The customer & policy operations domain (``customer_ops``): its entity kinds, consequential tools
and three scenario templates (duplicate-charge refund, subscription cancellation, lost-shipment
claim).

Every entity, person and organization is fictional. See :mod:`worlds.ledger.catalog` for the
template format; :mod:`worlds.ledger.domains` lists the six domains.
"""

from __future__ import annotations

from ..catalog import ActT, ActTool, Domain, Kind, Template, money, note, person, pick


CUSTOMER = Domain(
    "customer_ops",
    kinds=(
        Kind("customer", "customer_id", "CU", "notes", desc="a customer account"),
        Kind("order", "order_id", "OR", "notes", "customer_id", "orders", "an order"),
        Kind("charge", "charge_id", "CH", "notes", "customer_id", "charges", "a card charge"),
        Kind("policy", "policy_id", "PL", "notes", desc="a refund/credit policy"),
        Kind("ticket", "ticket_id", "TK", "comments", "customer_id", "tickets", "a support ticket"),
        Kind("subscription", "subscription_id", "SB", "notes", "customer_id", "subscriptions", "a subscription"),
        Kind("shipment", "shipment_id", "SH", "notes", "order_id", "shipments", "a shipment"),
        Kind("refund", "refund_id", "RF", "notes", "charge_id", "refunds", "a refund"),
        Kind("credit", "credit_id", "CR", "notes", "customer_id", "credits", "an account credit"),
        Kind("message", "message_id", "MS", "notes", desc="a sent customer message"),
        Kind("cancellation", "cancellation_id", "CN", "notes", desc="a subscription cancellation"),
        Kind("claim", "claim_id", "CL", "notes", desc="a carrier claim"),
        Kind("export", "export_id", "EX", "notes", desc="an account data export"),
        Kind("payment_method", "payment_method_id", "PM", "notes", "customer_id", "payment_methods",
             "a stored payment method"),
        Kind("carrier", "carrier_id", "CA", "notes", desc="a shipping carrier account"),
    ),
    tools=(
        ActTool("refund_charge", "charge", (("charge_id", "string", "charge to refund"),
                                            ("amount", "number", "amount to refund, e.g. 49.99"),
                                            ("reference_id", "string", "ticket or cancellation id this refund settles")),
                "Refund a card charge. Processed asynchronously: confirm the charge status afterwards.",
                {"status": "refunded"}, True, ("refund", "refund_id", "RF", "issued")),
        ActTool("notify_customer", "customer", (("customer_id", "string", "recipient"),
                                                ("template", "string", "message template name"),
                                                ("reference_id", "string", "id the message refers to")),
                "Send a templated email to a customer.", {}, False, ("message", "message_id", "MS", "sent")),
        ActTool("apply_credit", "customer", (("customer_id", "string", "account to credit"),
                                             ("amount", "number", "credit amount")),
                "Apply a goodwill credit to a customer account.", {"open_credit": True}, False,
                ("credit", "credit_id", "CR", "applied")),
        ActTool("close_ticket", "ticket", (("ticket_id", "string", "ticket to close"),
                                           ("resolution", "string", "resolution code"),
                                           ("reference_id", "string", "id of the resolving record")),
                "Close a support ticket with a resolution code.", {"status": "closed"}, False, None),
        ActTool("cancel_subscription", "subscription", (("subscription_id", "string", "subscription to cancel"),
                                                        ("reason", "string", "cancellation reason code")),
                "Cancel a subscription. Asynchronous: confirm the subscription status afterwards.",
                {"status": "cancelled"}, True, ("cancellation", "cancellation_id", "CN", "recorded")),
        ActTool("export_account_data", "customer", (("customer_id", "string", "account"),
                                                    ("format", "string", "csv or json")),
                "Prepare a data export of a customer account.", {"export_ready": True}, False,
                ("export", "export_id", "EX", "ready")),
        ActTool("file_carrier_claim", "shipment", (("shipment_id", "string", "lost shipment"),
                                                   ("amount", "number", "claimed value")),
                "File a loss claim with the carrier. Asynchronous: confirm the shipment's claim status.",
                {"claim_status": "filed"}, True, ("claim", "claim_id", "CL", "filed")),
        ActTool("reship_order", "order", (("order_id", "string", "order to reship"),
                                          ("claim_reference", "string", "carrier claim id covering the loss")),
                "Send a replacement for an order.", {"status": "replacement_sent"}, False,
                ("shipment", "shipment_id", "SH", "label_created")),
    ),
    templates=(
        Template(
            "duplicate_charge_refund",
            roles=(
                ("cust", "customer", {"name": person, "tier": pick("standard", "gold", "gold"),
                                      "account_status": "active", "email_verified": True,
                                      "open_credit": False, "export_ready": False,
                                      "notes": note("Prefers email contact.", "Long-time customer.")}),
                ("order", "order", {"customer_id": "@cust", "total": money(20, 180), "status": "delivered",
                                    "notes": note("Gift wrap requested.", "Left at front desk.")}),
                ("orig", "charge", {"customer_id": "@cust", "order_id": "@order", "amount": "=order.total",
                                    "status": "settled", "duplicate_of": None, "notes": "Original charge."}),
                ("dup", "charge", {"customer_id": "@cust", "order_id": "@order", "amount": "=order.total",
                                   "status": "posted", "duplicate_of": "@orig",
                                   "notes": note("Gateway retry at checkout.", "Posted 40 s after the original.")}),
                ("card", "payment_method", {"customer_id": "@cust", "brand": pick("Visa", "Mastercard"),
                                            "last4": lambda r: f"{r.randint(0, 9999):04d}", "status": "active",
                                            "notes": "Default card."}),
                ("policy", "policy", {"name": "Duplicate charge policy", "max_auto_refund": 250.0,
                                      "goodwill_credit": 5.0, "goodwill_allowed_tiers": "gold",
                                      "notes": "Refund duplicates in full; credit gold customers."}),
                ("ticket", "ticket", {"customer_id": "@cust", "subject": "Charged twice", "status": "open",
                                      "comments": note("Customer attached a bank statement.", "Second contact.")}),
            ),
            twin="orig",
            A=ActT("refund_charge", "dup", {"amount": "=dup.amount", "reference_id": "@ticket"},
                   core=("dup.amount", "dup.status", "dup.duplicate_of", "orig.status", "order.total"),
                   extra=(("cust.account_status",), ("policy.max_auto_refund",), ("ticket.status",),
                          ("card.status",)),
                   flips=(("dup.status", "refunded", "the duplicate charge has already been refunded"),
                          ("orig.status", "reversed", "the original charge was reversed, so nothing was charged twice"),
                          ("cust.account_status", "fraud_review", "the account is under fraud review"),
                          ("policy.max_auto_refund", 10.0, "the amount exceeds the automatic refund limit"),
                          ("card.status", "closed", "the original card is closed, so the refund cannot be returned to it"))),
            B=ActT("notify_customer", "cust", {"template": "refund_confirmation", "reference_id": ("out", "A")},
                   core=("cust.email_verified", "dup.status")),
            C=ActT("apply_credit", "cust", {"amount": "=policy.goodwill_credit"},
                   core=("cust.tier", "policy.goodwill_credit", "policy.goodwill_allowed_tiers")),
            D=ActT("close_ticket", "ticket", {"resolution": "refunded", "reference_id": ("out", "C")},
                   core=("ticket.status", "cust.open_credit")),
            ctx={
                "V1": "{cust.name} ({cust}) says order {order} was charged twice and opened ticket {ticket}. "
                      "If charge {dup} is a genuine duplicate and refundable under policy {policy}, refund it "
                      "in full with the ticket as reference.",
                "V2": "{cust.name} ({cust}) says order {order} was charged twice (ticket {ticket}). Refund the "
                      "duplicate charge {dup} under policy {policy}, then email the customer the "
                      "'refund_confirmation' template referencing the refund once the charge shows as refunded.",
                "V3": "{cust.name} ({cust}) says order {order} was charged twice (ticket {ticket}). Refund the "
                      "duplicate charge {dup} under policy {policy} and send the 'refund_confirmation' email "
                      "referencing the refund once it shows as refunded; apply the policy's goodwill credit if "
                      "the customer's tier qualifies; when both are done, close the ticket as 'refunded' "
                      "referencing the credit.",
            },
        ),
        Template(
            "subscription_cancellation",
            roles=(
                ("cust", "customer", {"name": person, "tier": "standard", "account_status": "active",
                                      "email_verified": True, "open_credit": False, "export_ready": False,
                                      "notes": "Asked for a data export before leaving."}),
                ("sub", "subscription", {"customer_id": "@cust", "plan": pick("Family", "Pro", "Studio"),
                                         "status": "active", "monthly_price": money(8, 40),
                                         "in_minimum_term": False, "notes": "Renews monthly."}),
                ("charge", "charge", {"customer_id": "@cust", "order_id": None, "amount": "=sub.monthly_price",
                                      "status": "settled", "duplicate_of": None,
                                      "notes": "Latest renewal charge."}),
                ("policy", "policy", {"name": "Cancellation policy", "refund_last_renewal": True,
                                      "max_auto_refund": 100.0, "notes": "Refund the last renewal on cancellation."}),
                ("ticket", "ticket", {"customer_id": "@cust", "subject": "Cancel my plan", "status": "open",
                                      "requester_verified": True,
                                      "comments": "Customer wants the export emailed."}),
                ("card", "payment_method", {"customer_id": "@cust", "brand": pick("Visa", "Amex"),
                                            "last4": lambda r: f"{r.randint(0, 9999):04d}", "status": "active",
                                            "notes": "Used for renewals."}),
            ),
            twin=("clone", {"plan": "=sub.plan"}),
            A=ActT("cancel_subscription", "sub", {"reason": "customer_request"},
                   core=("sub.status", "sub.customer_id", "sub.in_minimum_term", "cust.account_status",
                         "ticket.requester_verified"),
                   extra=(("policy.refund_last_renewal",), ("charge.status",), ("card.status",)),
                   flips=(("sub.status", "cancelled", "the subscription is already cancelled"),
                          ("ticket.requester_verified", False, "the requester is not verified as the account holder"),
                          ("sub.in_minimum_term", True, "the subscription is still in its minimum term"),
                          ("cust.account_status", "legal_hold", "the account is under a legal hold"))),
            B=ActT("refund_charge", "charge", {"amount": "=charge.amount", "reference_id": ("out", "A")},
                   core=("sub.status", "charge.amount", "charge.status")),
            C=ActT("export_account_data", "cust", {"format": "csv"}, core=("cust.email_verified", "ticket.subject")),
            D=ActT("notify_customer", "cust", {"template": "cancellation_complete", "reference_id": ("out", "C")},
                   core=("cust.export_ready", "cust.email_verified")),
            ctx={
                "V1": "{cust.name} ({cust}) asked in ticket {ticket} to cancel subscription {sub} "
                      "({sub.plan}). Cancel it with reason 'customer_request' if nothing prevents it.",
                "V2": "{cust.name} ({cust}) asked in ticket {ticket} to cancel subscription {sub}. Cancel it "
                      "('customer_request'); once it shows as cancelled, refund the last renewal charge "
                      "{charge} in full, referencing the cancellation.",
                "V3": "{cust.name} ({cust}) asked in ticket {ticket} to cancel subscription {sub}. Cancel it "
                      "('customer_request') and, once cancelled, refund renewal charge {charge} referencing "
                      "the cancellation; independently prepare a csv data export for the verified email; "
                      "after both, send the 'cancellation_complete' email referencing the export.",
            },
        ),
        Template(
            "lost_shipment_claim",
            roles=(
                ("cust", "customer", {"name": person, "tier": "gold", "account_status": "active",
                                      "email_verified": True, "open_credit": False, "export_ready": False,
                                      "notes": "Business customer."}),
                ("order", "order", {"customer_id": "@cust", "total": money(60, 400), "status": "in_transit",
                                    "notes": "Fragile items."}),
                ("ship", "shipment", {"order_id": "@order", "carrier": pick("Parcelwing", "Gullway Freight"),
                                      "status": "lost", "insured": True, "declared_value": "=order.total",
                                      "claim_status": "none", "notes": "Last scan 9 days ago."}),
                ("carrier", "carrier", {"name": pick("Parcelwing", "Gullway Freight"), "claims_window_open": True,
                                        "notes": "Claims within 30 days of the last scan."}),
                ("policy", "policy", {"name": "Lost parcel policy", "claims_allowed": True,
                                      "goodwill_credit": 10.0, "notes": "Claim first, then reship."}),
                ("ticket", "ticket", {"customer_id": "@cust", "subject": "Parcel never arrived",
                                      "status": "open", "comments": "Customer is upset."}),
            ),
            twin=("clone", {}),
            A=ActT("file_carrier_claim", "ship", {"amount": "=ship.declared_value"},
                   core=("ship.status", "ship.insured", "ship.declared_value", "ship.claim_status",
                         "order.status", "cust.account_status"),
                   extra=(("policy.claims_allowed",), ("carrier.claims_window_open",), ("ticket.status",)),
                   flips=(("ship.status", "delivered", "the carrier shows the shipment as delivered"),
                          ("ship.insured", False, "the shipment is not insured"),
                          ("ship.claim_status", "filed", "a claim has already been filed"),
                          ("carrier.claims_window_open", False, "the carrier's claim window has closed"))),
            B=ActT("reship_order", "order", {"claim_reference": ("out", "A")},
                   core=("ship.claim_status", "order.status")),
            C=ActT("apply_credit", "cust", {"amount": "=policy.goodwill_credit"},
                   core=("cust.tier", "policy.goodwill_credit")),
            D=ActT("close_ticket", "ticket", {"resolution": "replacement_sent", "reference_id": ("out", "C")},
                   core=("ticket.status", "order.status")),
            ctx={
                "V1": "Ticket {ticket}: {cust.name} ({cust}) reports order {order} never arrived. If shipment "
                      "{ship} is lost, insured and not yet claimed, file a carrier claim for its declared value.",
                "V2": "Ticket {ticket}: order {order} of {cust.name} ({cust}) never arrived. File a carrier "
                      "claim for shipment {ship} at its declared value; once the claim shows as filed, reship "
                      "the order citing the claim id.",
                "V3": "Ticket {ticket}: order {order} of {cust.name} ({cust}) never arrived. File a carrier "
                      "claim for shipment {ship} (declared value) and, once filed, reship the order citing the "
                      "claim; also apply the lost-parcel goodwill credit from policy {policy}; after both, "
                      "close the ticket as 'replacement_sent' referencing the credit.",
            },
        ),
    ),
)
