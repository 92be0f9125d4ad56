"""The research assistance domain (``research_assistance``): its entity kinds, consequential tools and
three scenario templates (dataset access grant, manuscript submission, compute-job approval).

Every entity, person and organization is fictional. See :mod:`worlds.ledger.catalog` for the
template format; :mod:`worlds.ledger.domains` lists the six domains.
"""

from __future__ import annotations

from ..catalog import ActT, ActTool, Domain, Kind, Template, integer, org, person, pick


_RES_ROLES = (
    ("pi", "researcher", {"name": person, "status": "active", "training_complete": True,
                          "email_verified": True, "workspace_ready": False, "affiliation": org,
                          "notes": "Principal investigator."}),
    ("project", "project", {"title": pick("Coastal sediment survey", "Sleep and memory cohort", "Urban heat mapping"),
                            "pi_id": "@pi", "status": "active", "storage_quota_gb": integer(200, 900),
                            "storage_reserved": False, "notes": "Funded through 2027."}),
    ("irb", "irb_protocol", {"project_id": "@project", "status": "approved", "expires_on": "2027-06-30",
                             "notes": "Minimal-risk protocol."}),
    ("alloc", "allocation", {"project_id": "@project", "hours_remaining": integer(400, 3000), "status": "active",
                             "reserved": False, "notes": "Cluster allocation."}),
)
_RES_C = ActT("reserve_storage", "project", {"gigabytes": 100}, core=("project.status", "project.storage_quota_gb"))
_RES_D = ActT("send_onboarding_packet", "pi", {"reservation_id": ("out", "C")},
              core=("pi.email_verified", "project.storage_reserved"))

RESEARCH = Domain(
    "research_assistance",
    kinds=(
        Kind("researcher", "researcher_id", "RS", "notes", desc="a researcher"),
        Kind("project", "project_id", "PJ", "notes", desc="a research project"),
        Kind("irb_protocol", "protocol_id", "IRB", "notes", "project_id", "irb_protocols", "an IRB protocol"),
        Kind("allocation", "allocation_id", "CA", "notes", "project_id", "allocations", "a compute allocation"),
        Kind("dataset", "dataset_id", "DS", "description", desc="a dataset"),
        Kind("access_request", "request_id", "AR", "notes", "researcher_id", "access_requests", "a data access request"),
        Kind("dua", "dua_id", "DU", "notes", "dataset_id", "duas", "a data use agreement"),
        Kind("manuscript", "manuscript_id", "MN", "notes", "project_id", "manuscripts", "a manuscript"),
        Kind("venue", "venue_id", "VE", "notes", desc="a publication venue"),
        Kind("job", "job_id", "JO", "notes", "project_id", "jobs", "a batch compute job"),
        Kind("grant", "grant_id", "GR", "notes", "request_id", "grants", "an access grant"),
        Kind("workspace", "workspace_id", "WS", "notes", desc="an analysis workspace"),
        Kind("storage_reservation", "reservation_id", "SV", "notes", desc="a storage reservation"),
        Kind("onboarding", "packet_id", "OB", "notes", desc="an onboarding packet"),
        Kind("submission", "submission_id", "SU", "notes", "manuscript_id", "submissions", "a venue submission"),
        Kind("preprint", "preprint_id", "PP", "notes", desc="a preprint posting"),
        Kind("run", "run_id", "RN", "notes", "job_id", "runs", "a scheduled compute run"),
        Kind("research_notice", "notice_id", "RQ", "notes", desc="a notice to a researcher"),
    ),
    tools=(
        ActTool("grant_dataset_access", "access_request", (("request_id", "string", "access request"),
                                                           ("access_level", "string", "read_only or read_write")),
                "Grant a data access request. Asynchronous: confirm the request status afterwards.",
                {"status": "granted"}, True, ("grant", "grant_id", "GR", "active")),
        ActTool("provision_workspace", "researcher", (("researcher_id", "string", "researcher"),
                                                      ("grant_id", "string", "grant covering the data")),
                "Provision an analysis workspace with the granted data mounted.", {"workspace_ready": True},
                False, ("workspace", "workspace_id", "WS", "ready")),
        ActTool("reserve_storage", "project", (("project_id", "string", "project"),
                                               ("gigabytes", "number", "storage to reserve")),
                "Reserve project storage.", {"storage_reserved": True}, False,
                ("storage_reservation", "reservation_id", "SV", "reserved")),
        ActTool("send_onboarding_packet", "researcher", (("researcher_id", "string", "researcher"),
                                                         ("reservation_id", "string", "storage reservation")),
                "Email the onboarding packet (workspace and storage details).", {}, False,
                ("onboarding", "packet_id", "OB", "sent")),
        ActTool("submit_manuscript", "manuscript", (("manuscript_id", "string", "manuscript"),
                                                    ("venue_id", "string", "venue")),
                "Submit a manuscript to a venue. Asynchronous: confirm the manuscript status afterwards.",
                {"status": "submitted"}, True, ("submission", "submission_id", "SU", "received")),
        ActTool("post_preprint", "manuscript", (("manuscript_id", "string", "manuscript"),
                                                ("submission_id", "string", "venue submission it corresponds to")),
                "Post the submitted version as a preprint.", {"preprint_posted": True}, False,
                ("preprint", "preprint_id", "PP", "posted")),
        ActTool("approve_job", "job", (("job_id", "string", "job"), ("hours", "number", "core-hours to approve")),
                "Approve a queued compute job. Asynchronous: confirm the job status afterwards.",
                {"status": "approved"}, True, ("run", "run_id", "RN", "scheduled")),
        ActTool("notify_researcher", "researcher", (("researcher_id", "string", "researcher"),
                                                    ("reference_id", "string", "record the notice is about")),
                "Send a notice to a researcher.", {}, False, ("research_notice", "notice_id", "RQ", "sent")),
    ),
    templates=(
        Template(
            "dataset_access_grant",
            roles=_RES_ROLES + (
                ("ds", "dataset", {"name": pick("Harbor water samples 2019-2024", "Pediatric sleep diaries"),
                                   "license": "restricted-research", "contains_pii": True, "status": "available",
                                   "description": "De-identified extract."}),
                ("req", "access_request", {"researcher_id": "@pi", "dataset_id": "@ds", "status": "pending",
                                           "purpose": "secondary analysis", "protocol_id": "@irb",
                                           "notes": "Submitted through the portal."}),
                ("dua", "dua", {"dataset_id": "@ds", "researcher_id": "@pi", "status": "signed",
                                "notes": "Countersigned by the data steward."}),
            ),
            twin=("clone", {"purpose": "teaching"}),
            A=ActT("grant_dataset_access", "req", {"access_level": "read_only"},
                   core=("req.status", "req.dataset_id", "req.protocol_id", "pi.training_complete", "pi.status",
                         "irb.status"),
                   extra=(("dua.status",), ("ds.status",), ("project.status",)),
                   flips=(("pi.training_complete", False, "the researcher's human-subjects training is incomplete"),
                          ("irb.status", "expired", "the IRB protocol has expired"),
                          ("req.status", "withdrawn", "the request was withdrawn"),
                          ("dua.status", "unsigned", "the data use agreement is not signed"),
                          ("ds.status", "retracted", "the dataset has been retracted"))),
            B=ActT("provision_workspace", "pi", {"grant_id": ("out", "A")}, core=("req.status", "pi.affiliation")),
            C=_RES_C, D=_RES_D,
            ctx={
                "V1": "{pi.name} ({pi}) requests access to dataset {ds} ({ds.name}) via request {req}. Grant "
                      "'read_only' access if their training, the IRB protocol and the request are in order.",
                "V2": "Grant request {req} of {pi} for dataset {ds} ('read_only'); once the request shows as "
                      "granted, provision their workspace with the grant.",
                "V3": "Grant request {req} of {pi} for dataset {ds} ('read_only') and, once granted, provision "
                      "their workspace with the grant; reserve 100 GB of storage for project {project}; after "
                      "both, send the onboarding packet citing the reservation.",
            },
        ),
        Template(
            "manuscript_submission",
            roles=_RES_ROLES + (
                ("venue", "venue", {"name": pick("Journal of Applied Tides", "Sleep Methods Letters"),
                                    "status": "open", "word_limit": 8000, "preprint_policy": "allowed",
                                    "notes": "Double-blind review."}),
                ("ms", "manuscript", {"project_id": "@project", "title": pick("Sediment transport after storms",
                                                                            "Naps and recall in adolescents"),
                                      "status": "ready", "authors_confirmed": True, "coi_declared": True,
                                      "word_count": integer(5200, 7900), "version": "final",
                                      "preprint_posted": False, "notes": "Figures finalized."}),
            ),
            twin=("clone", {"version": "draft-2"}),
            A=ActT("submit_manuscript", "ms", {"venue_id": "@venue"},
                   core=("ms.status", "ms.authors_confirmed", "ms.coi_declared", "ms.word_count",
                         "venue.word_limit", "venue.status"),
                   extra=(("pi.status",), ("irb.status",), ("project.status",)),
                   flips=(("ms.authors_confirmed", False, "not all authors have approved the final version"),
                          ("ms.coi_declared", False, "conflicts of interest are not declared"),
                          ("venue.status", "closed", "the venue is closed to submissions"),
                          ("ms.word_count", 12400, "the manuscript exceeds the venue's word limit"),
                          ("irb.status", "suspended", "the underlying IRB protocol is suspended"))),
            B=ActT("post_preprint", "ms", {"submission_id": ("out", "A")}, core=("ms.status", "venue.preprint_policy")),
            C=_RES_C, D=_RES_D,
            ctx={
                "V1": "Submit manuscript {ms} ('{ms.title}') of project {project} to venue {venue} ({venue.name}) "
                      "if all authors confirmed, conflicts are declared and it fits the venue's limits.",
                "V2": "Submit manuscript {ms} to venue {venue}; once it shows as submitted, post the preprint "
                      "citing the submission.",
                "V3": "Submit manuscript {ms} to venue {venue} and, once submitted, post the preprint citing the "
                      "submission; reserve 100 GB of storage for project {project}'s data release; after both, "
                      "send {pi}'s onboarding packet citing the reservation.",
            },
        ),
        Template(
            "compute_job_approval",
            roles=_RES_ROLES + (
                ("job", "job", {"project_id": "@project", "est_hours": integer(40, 350), "status": "queued_for_review",
                                "submitted_by": "@pi", "image": pick("hydro-sim:3.2", "sleepstats:1.8"),
                                "notes": "Parameter sweep."}),
            ),
            twin=("clone", {"image": "hydro-sim:3.1"}),
            A=ActT("approve_job", "job", {"hours": "=job.est_hours"},
                   core=("job.est_hours", "job.status", "job.project_id", "alloc.hours_remaining", "alloc.status",
                         "project.status"),
                   extra=(("pi.status",), ("irb.status",), ("pi.training_complete",)),
                   flips=(("alloc.hours_remaining", 12, "the allocation has too few hours left"),
                          ("project.status", "suspended", "the project is suspended"),
                          ("job.status", "cancelled", "the job was cancelled by its submitter"),
                          ("irb.status", "expired", "the IRB protocol has expired"),
                          ("alloc.status", "frozen", "the allocation is frozen"))),
            B=ActT("notify_researcher", "pi", {"reference_id": ("out", "A")}, core=("job.status", "pi.email_verified")),
            C=_RES_C, D=_RES_D,
            ctx={
                "V1": "Job {job} ({job.image}) of project {project} is queued for review. Approve it for its "
                      "estimated core-hours if the allocation {alloc} covers them and the project is active.",
                "V2": "Approve job {job} of project {project} for its estimated core-hours; once it shows as "
                      "approved, notify {pi} citing the scheduled run.",
                "V3": "Approve job {job} of project {project} for its estimated core-hours and, once approved, "
                      "notify {pi} citing the run; reserve 100 GB of storage for the project's outputs; after "
                      "both, send {pi}'s onboarding packet citing the reservation.",
            },
        ),
    ),
)
