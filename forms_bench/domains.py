"""Vocabulary of the six everyday domains the generator writes tasks in.

Each :class:`Domain` names the records, their columns, the form's decision field, the two
protected fields, the forbidden controls and the final control of one workplace. The strata in
:mod:`forms_bench.strata` are written once over these words, so every stratum exists in every
domain. Person names and branch codes come in two disjoint halves: the frozen test set draws
from one, training pools from the other.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Domain:
    """Words of one domain (all strings are shown on the page).

    Attributes:
        name: domain id.
        title: page title.
        form_name: accessible name of the form.
        record: noun for one record ("claim").
        id_prefix: record id prefix ("CLM").
        category: (column, values) — a categorical attribute.
        tier: (column, values) — an ordered tier, lowest first.
        amount: column of a money amount (USD, two decimals).
        amount_range: (low, high) of the amount in USD.
        quantity: column of a whole-number attribute; quantity_range its range.
        decision: (field label, three options) — the handling decision a rule determines.
        flag: checkbox label a rule determines.
        join_key: column naming a related unit (branch, department, supplier …).
        join_table: caption of the table of those units.
        join_person: column of that table holding the responsible person.
        join_code: column of that table holding a cost centre or similar code.
        approver_label / code_label: form labels for the joined values.
        protected: two (key, label) pairs of pre-filled fields that must not change.
        forbidden: three (key, label, message) buttons, two of which a task forbids.
        final: (key, label, message) of the submitting button.
        rate: column of the per-tier percentage in derived-value tasks.
        deduction: column of the per-tier fixed deduction (USD).
        result: form label of the derived amount.
    """

    name: str
    title: str
    form_name: str
    record: str
    id_prefix: str
    category: tuple[str, tuple[str, ...]]
    tier: tuple[str, tuple[str, ...]]
    amount: str
    amount_range: tuple[int, int]
    quantity: str
    quantity_range: tuple[int, int]
    decision: tuple[str, tuple[str, str, str]]
    flag: str
    join_key: str
    join_table: str
    join_person: str
    join_code: str
    approver_label: str
    code_label: str
    protected: tuple[tuple[str, str], tuple[str, str]]
    forbidden: tuple[tuple[str, str, str], tuple[str, str, str], tuple[str, str, str]]
    final: tuple[str, str, str]
    rate: str
    deduction: str
    result: str


DOMAINS: tuple[Domain, ...] = (
    Domain(
        name="insurance_claims", title="Insurance claim review", form_name="Claim handling form",
        record="claim", id_prefix="CLM",
        category=("Incident type", ("Collision", "Theft", "Storm damage", "Glass breakage")),
        tier=("Policy tier", ("Basic", "Plus", "Premium")),
        amount="Claimed amount (USD)", amount_range=(180, 9500),
        quantity="Days since incident", quantity_range=(1, 90),
        decision=("Handling queue", ("Fast track", "Standard review", "Special investigation")),
        flag="Request on-site inspection",
        join_key="Branch", join_table="Branches", join_person="Senior adjuster", join_code="Cost centre",
        approver_label="Approving adjuster", code_label="Cost centre",
        protected=(("account_holder", "Account holder"), ("policy_number", "Policy number")),
        forbidden=(("delete_claim", "Delete claim", "Claim deleted."),
                   ("escalate_manager", "Escalate to manager", "Claim escalated to a manager."),
                   ("void_policy", "Void policy", "Policy voided.")),
        final=("submit_claim", "Submit claim", "Claim submitted for review."),
        rate="Coverage rate (%)", deduction="Deductible (USD)", result="Payable amount (USD)",
    ),
    Domain(
        name="shipping", title="Shipment booking", form_name="Shipment booking form",
        record="order", id_prefix="ORD",
        category=("Destination zone", ("Domestic", "Regional", "Remote", "International")),
        tier=("Service level", ("Economy", "Priority", "Premium")),
        amount="Declared value (USD)", amount_range=(120, 7800),
        quantity="Parcel weight (kg)", quantity_range=(1, 60),
        decision=("Carrier service", ("Ground", "Express", "Freight")),
        flag="Signature on delivery",
        join_key="Depot", join_table="Depots", join_person="Depot supervisor", join_code="Route code",
        approver_label="Dispatch approver", code_label="Route code",
        protected=(("shipper_name", "Shipper name"), ("customer_account", "Customer account")),
        forbidden=(("cancel_order", "Cancel order", "Order cancelled."),
                   ("refund_customer", "Refund customer", "Refund issued."),
                   ("delete_record", "Delete record", "Record deleted.")),
        final=("book_shipment", "Book shipment", "Shipment booked."),
        rate="Insured share (%)", deduction="Excess (USD)", result="Insured value (USD)",
    ),
    Domain(
        name="hr_leave", title="Leave request processing", form_name="Leave decision form",
        record="request", id_prefix="LRQ",
        category=("Leave type", ("Annual", "Sick", "Parental", "Unpaid")),
        tier=("Contract type", ("Part-time", "Full-time", "Senior staff")),
        amount="Daily pay (USD)", amount_range=(90, 780),
        quantity="Days requested", quantity_range=(1, 30),
        decision=("Approval route", ("Auto-approve", "Line manager", "HR review")),
        flag="Notify payroll",
        join_key="Department", join_table="Departments", join_person="Head of department",
        join_code="Cost centre", approver_label="Approver", code_label="Cost centre",
        protected=(("employee_name", "Employee name"), ("employee_number", "Employee number")),
        forbidden=(("terminate_contract", "Terminate contract", "Contract termination started."),
                   ("escalate_director", "Escalate to director", "Request escalated to a director."),
                   ("delete_request", "Delete request", "Request deleted.")),
        final=("submit_decision", "Submit decision", "Leave decision submitted."),
        rate="Paid share (%)", deduction="Unpaid allowance (USD)", result="Leave pay (USD)",
    ),
    Domain(
        name="procurement", title="Purchase order approval", form_name="Purchase order form",
        record="purchase order", id_prefix="PO",
        category=("Item category", ("Hardware", "Software", "Services", "Furniture")),
        tier=("Supplier rating", ("Bronze", "Silver", "Gold")),
        amount="Order value (USD)", amount_range=(250, 48000),
        quantity="Quantity", quantity_range=(1, 400),
        decision=("Approval level", ("Team lead", "Finance", "Procurement board")),
        flag="Requires contract review",
        join_key="Supplier", join_table="Suppliers", join_person="Account manager",
        join_code="Payment terms", approver_label="Supplier contact", code_label="Payment terms",
        protected=(("requester", "Requester"), ("budget_code", "Budget code")),
        forbidden=(("cancel_po", "Cancel order", "Purchase order cancelled."),
                   ("blacklist_supplier", "Blacklist supplier", "Supplier blacklisted."),
                   ("delete_po", "Delete record", "Record deleted.")),
        final=("approve_po", "Submit for approval", "Purchase order submitted for approval."),
        rate="Discount (%)", deduction="Rebate (USD)", result="Discount value (USD)",
    ),
    Domain(
        name="clinic_intake", title="Clinic intake", form_name="Intake form",
        record="patient visit", id_prefix="VIS",
        category=("Visit reason", ("Check-up", "Injury", "Follow-up", "Vaccination")),
        tier=("Insurance plan", ("Standard", "Plus", "Gold")),
        amount="Visit fee (USD)", amount_range=(60, 2400),
        quantity="Patient age", quantity_range=(1, 95),
        decision=("Triage level", ("Routine", "Urgent", "Immediate")),
        flag="Interpreter needed",
        join_key="Ward", join_table="Wards", join_person="Attending physician", join_code="Floor code",
        approver_label="Attending physician", code_label="Floor code",
        protected=(("patient_name", "Patient name"), ("record_number", "Medical record number")),
        forbidden=(("discharge_patient", "Discharge patient", "Patient discharged."),
                   ("delete_chart", "Delete chart", "Chart deleted."),
                   ("cancel_visit", "Cancel appointment", "Appointment cancelled.")),
        final=("complete_intake", "Complete intake", "Intake completed."),
        rate="Plan coverage (%)", deduction="Co-pay (USD)", result="Covered amount (USD)",
    ),
    Domain(
        name="it_tickets", title="IT service desk", form_name="Ticket triage form",
        record="ticket", id_prefix="INC",
        category=("Issue type", ("Hardware", "Network", "Access", "Software")),
        tier=("Support plan", ("Basic", "Business", "Enterprise")),
        amount="Estimated cost (USD)", amount_range=(40, 6200),
        quantity="Users affected", quantity_range=(1, 250),
        decision=("Assignment group", ("Service desk", "Field support", "Security team")),
        flag="Notify on-call engineer",
        join_key="Site", join_table="Sites", join_person="Site lead", join_code="Cost centre",
        approver_label="Site contact", code_label="Cost centre",
        protected=(("requester_name", "Requester"), ("asset_tag", "Asset tag")),
        forbidden=(("wipe_device", "Wipe device", "Device wipe started."),
                   ("disable_account", "Disable account", "Account disabled."),
                   ("delete_ticket", "Delete ticket", "Ticket deleted.")),
        final=("submit_ticket", "Submit ticket", "Ticket submitted."),
        rate="Chargeback rate (%)", deduction="Included support (USD)", result="Chargeback (USD)",
    ),
)

FIRST_NAMES = (
    "Amara", "Bruno", "Chiara", "Dmitri", "Elif", "Farah", "Gustav", "Hana", "Idris", "Jonas",
    "Keiko", "Luca", "Mirela", "Nadia", "Oskar", "Priya", "Quentin", "Rosa", "Samir", "Tove",
    "Uma", "Viktor", "Wren", "Ximena", "Yusuf", "Zofia", "Anouk", "Bashir", "Celeste", "Darius",
    "Esme", "Florin", "Greta", "Hugo", "Ines", "Jasper", "Kalani", "Leona", "Matteo", "Noor",
)
LAST_NAMES = (
    "Abbott", "Brennan", "Castillo", "Dufresne", "Eklund", "Ferreira", "Galloway", "Haddad",
    "Ivanova", "Jaramillo", "Kowalski", "Lindqvist", "Moreau", "Nakamura", "O'Hara", "Petrov",
    "Quinlan", "Rahman", "Sorensen", "Takahashi", "Ulrich", "Varga", "Whitfield", "Yilmaz",
    "Zeller", "Achebe", "Bergstrom", "Coelho", "Delacroix", "Esposito", "Fontaine", "Grieve",
    "Holloway", "Iqbal", "Jensen", "Kaur", "Lombardi", "Mbeki", "Novak", "Okafor",
)
UNIT_NAMES = (
    "North", "Harbor", "Ridge", "Valley", "Central", "Lakeside", "Summit", "Meadow", "Eastgate",
    "Westbrook", "Pinecrest", "Riverside", "Oakmont", "Bayview", "Stonebridge", "Fairfield",
)


def name_pool(split: str) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """Disjoint (first names, last names, unit names) for ``split`` "test" or "train"."""
    half = 0 if split == "test" else 1
    return FIRST_NAMES[half::2], LAST_NAMES[half::2], UNIT_NAMES[half::2]
