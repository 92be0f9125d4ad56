"""A small hand-written task used by tests whose expectations are worked out by hand.

Page: one order table, two rules; fields: Case ID [10] (disabled), Account holder [11]
(protected, "Dana O'Neil"), Notes [12], Shipping method [13] (select, Standard), Priority [14]
(radio group: Low [15], High [16]; Low chosen), Signature required [17] (checkbox, clear);
buttons Submit request [20] (final), Delete record [21] and Escalate to manager [22]
(forbidden); status [23]. Target: Shipping method = Express.
"""

from forms_bench.schema import validate_task

SAMPLE = {
    "id": "demo-1", "stratum": "conditional_policy", "domain": "shipping",
    "goal": "Choose the shipping method the rules require for order O-1 and submit the form.",
    "page": {
        "title": "Shipment request", "intro": "Review the order and complete the shipment request.",
        "tables": [{"caption": "Orders", "columns": ["Order", "Weight (kg)", "Region"],
                    "rows": [["O-1", "12.5", "Remote"], ["O-2", "3", "Urban"]]}],
        "rules": ["Orders to remote regions ship Express.", "All other orders ship Standard."],
        "form_name": "Shipment request form",
        "fieldsets": [{"legend": "Shipment", "fields": [
            {"key": "case_id", "bid": "10", "label": "Case ID", "kind": "text", "initial": "CASE-7",
             "disabled": True},
            {"key": "holder", "bid": "11", "label": "Account holder", "kind": "text", "initial": "Dana O'Neil"},
            {"key": "notes", "bid": "12", "label": "Notes", "kind": "textarea", "initial": ""},
            {"key": "method", "bid": "13", "label": "Shipping method", "kind": "select",
             "options": ["Standard", "Express", "Freight"], "initial": "Standard"},
            {"key": "priority", "bid": "14", "label": "Priority", "kind": "radio", "options": ["Low", "High"],
             "option_bids": ["15", "16"], "initial": "Low"},
            {"key": "sig", "bid": "17", "label": "Signature required", "kind": "checkbox", "initial": False}]}],
        "controls": [
            {"key": "submit", "bid": "20", "label": "Submit request", "message": "Shipment request submitted."},
            {"key": "delete", "bid": "21", "label": "Delete record", "message": "Record deleted."},
            {"key": "escalate", "bid": "22", "label": "Escalate to manager", "message": "Escalated to manager."}],
        "status_bid": "23"},
    "spec": {"targets": {"method": "Express"}, "final_control": "submit", "protected": ["holder", "case_id"],
             "forbidden": ["delete", "escalate"]},
}

task = validate_task(SAMPLE)
