"""The engineering & infrastructure operations domain (``engineering_ops``): its entity kinds,
consequential tools and three scenario templates (credential rotation, release deploy, host drain),
with the release-version value generator they use.

Every entity, person and organization is fictional. See :mod:`worlds.ledger.catalog` for the
template format; :mod:`worlds.ledger.domains` lists the six domains.
"""

from __future__ import annotations

from ..catalog import ActT, ActTool, Domain, Kind, Template, integer, person, pick


def version(r) -> str:
    """A release version string."""
    return f"v{r.randint(1, 9)}.{r.randint(0, 30)}.{r.randint(0, 9)}"


_ENG_C = ActT("post_status_notice", "team", {"notice": "maintenance"},
              core=("team.status_channel", "team.paging_enabled"))
_ENG_D = ActT("close_change_request", "chg", {"notice_id": ("out", "C")},
              core=("chg.status", "team.notified"))
_ENG_ROLES = (
    ("team", "team", {"name": pick("Payments SRE", "Edge Platform", "Data Infra"), "lead": person,
                      "paging_enabled": True, "on_call_ack": True, "status_channel": "#ops-status",
                      "notified": False, "notes": "Owns tier-1 services."}),
    ("svc", "service", {"name": pick("ledger-api", "edge-gateway", "ingest-worker", "auth-broker"),
                        "owner_team": "@team", "tier": pick("tier-1", "tier-2"), "status": "healthy",
                        "healthy_replicas": integer(5, 8), "min_replicas": 3, "smoke_status": "none",
                        "secret_version": "previous", "description": "Customer-facing service."}),
    ("chg", "change_request", {"service_id": "@svc", "status": "approved", "approved_by": person,
                               "window_open": True, "risk": pick("low", "medium"),
                               "notes": "Approved at the weekly CAB."}),
    ("freeze", "freeze", {"scope": "production", "active": False, "notes": "Quarter-end freeze calendar."}),
    ("incident", "incident", {"service_id": "@svc", "severity": "sev3", "status": "monitoring",
                              "comments": "Minor latency blip last week."}),
)

ENGINEERING = Domain(
    "engineering_ops",
    kinds=(
        Kind("team", "team_id", "TM", "notes", desc="an engineering team"),
        Kind("service", "service_id", "SV", "description", desc="a production service"),
        Kind("credential", "credential_id", "KY", "notes", "service_id", "credentials", "a service credential"),
        Kind("change_request", "change_id", "CHG", "notes", "service_id", "change_requests", "a change request"),
        Kind("freeze", "freeze_id", "FZ", "notes", desc="a deploy-freeze calendar entry"),
        Kind("incident", "incident_id", "IN", "comments", "service_id", "incidents", "an incident"),
        Kind("build", "build_id", "BD", "notes", "service_id", "builds", "a release build"),
        Kind("host", "host_id", "HS", "notes", "service_id", "hosts", "a host"),
        Kind("rotation", "rotation_id", "RT", "notes", "credential_id", "rotations", "a credential rotation"),
        Kind("rollout", "rollout_id", "RO", "notes", desc="a consumer restart rollout"),
        Kind("notice", "notice_id", "NT", "notes", desc="a status notice"),
        Kind("deploy_job", "job_id", "JB", "notes", "build_id", "deploy_jobs", "a deploy job"),
        Kind("smoke_run", "smoke_run_id", "SR", "notes", desc="a smoke-test run"),
        Kind("drain_job", "drain_job_id", "DJ", "notes", "host_id", "drain_jobs", "a host drain job"),
        Kind("decommission", "decommission_id", "DC", "notes", desc="a decommission record"),
    ),
    tools=(
        ActTool("rotate_credential", "credential", (("credential_id", "string", "credential to rotate"),
                                                    ("reason", "string", "rotation reason code")),
                "Rotate a service credential. Asynchronous: confirm the credential status afterwards.",
                {"status": "rotated"}, True, ("rotation", "rotation_id", "RT", "completed")),
        ActTool("restart_consumers", "service", (("service_id", "string", "service whose consumers reload"),
                                                 ("rotation_id", "string", "rotation that produced the new secret")),
                "Roll the service's consumers so they load the rotated secret.", {"secret_version": "current"},
                False, ("rollout", "rollout_id", "RO", "rolling")),
        ActTool("post_status_notice", "team", (("team_id", "string", "team posting"),
                                               ("notice", "string", "notice code")),
                "Post a status notice to a team's status channel.", {"notified": True}, False,
                ("notice", "notice_id", "NT", "posted")),
        ActTool("close_change_request", "change_request", (("change_id", "string", "change request"),
                                                           ("notice_id", "string", "status notice announcing it")),
                "Close a change request as implemented.", {"status": "closed"}, False, None),
        ActTool("deploy_build", "build", (("build_id", "string", "build to deploy"),
                                          ("environment", "string", "target environment")),
                "Deploy a build. Asynchronous: confirm the build's deploy status afterwards.",
                {"status": "deployed"}, True, ("deploy_job", "job_id", "JB", "running")),
        ActTool("run_smoke_tests", "service", (("service_id", "string", "service under test"),
                                               ("job_id", "string", "deploy job to verify")),
                "Run the smoke-test suite against a deployment.", {"smoke_status": "passed"}, False,
                ("smoke_run", "smoke_run_id", "SR", "passed")),
        ActTool("drain_host", "host", (("host_id", "string", "host to drain"),
                                       ("reason", "string", "reason code")),
                "Drain traffic from a host. Asynchronous: confirm the host's drained flag afterwards.",
                {"drained": True}, True, ("drain_job", "drain_job_id", "DJ", "completed")),
        ActTool("decommission_host", "host", (("host_id", "string", "drained host"),
                                              ("drain_job_id", "string", "drain job that emptied it")),
                "Decommission a drained host.", {"status": "decommissioned"}, False,
                ("decommission", "decommission_id", "DC", "recorded")),
    ),
    templates=(
        Template(
            "credential_rotation",
            roles=_ENG_ROLES + (
                ("key", "credential", {"service_id": "@svc", "owner_team": "@team", "environment": "production",
                                       "status": "active", "rotation_due": True, "age_days": integer(91, 200),
                                       "notes": "Used by the billing consumers."}),
            ),
            twin=("clone", {"environment": "staging"}),
            A=ActT("rotate_credential", "key", {"reason": "scheduled_rotation"},
                   core=("key.status", "key.owner_team", "key.rotation_due", "svc.owner_team", "chg.status",
                         "chg.window_open"),
                   extra=(("freeze.active",), ("incident.severity",), ("team.on_call_ack",)),
                   flips=(("key.status", "revoked", "the credential is already revoked"),
                          ("key.owner_team", "TM-0417", "the credential belongs to another team"),
                          ("chg.status", "rejected", "the change request was rejected"),
                          ("chg.window_open", False, "the change window is closed"),
                          ("freeze.active", True, "a production deploy freeze is active"),
                          ("incident.severity", "sev1", "a sev1 incident is open on the service"))),
            B=ActT("restart_consumers", "svc", {"rotation_id": ("out", "A")},
                   core=("key.status", "svc.status")),
            C=_ENG_C, D=_ENG_D,
            ctx={
                "V1": "Credential {key} of service {svc} is due for rotation under change {chg}. Rotate it "
                      "('scheduled_rotation') if it is owned by the service's team and the change is approved "
                      "and in its window.",
                "V2": "Rotate credential {key} of service {svc} under change {chg} ('scheduled_rotation'); "
                      "once the credential shows as rotated, restart the service's consumers with the "
                      "rotation id.",
                "V3": "Under change {chg}: rotate credential {key} of {svc} ('scheduled_rotation') and, once "
                      "it shows as rotated, restart the consumers with the rotation id; post a "
                      "'maintenance' notice for team {team}; after both, close the change request citing "
                      "the notice.",
            },
        ),
        Template(
            "release_deploy",
            roles=_ENG_ROLES + (
                ("build", "build", {"service_id": "@svc", "version": version, "tests_passed": True,
                                    "signed": True, "status": "ready", "branch": "main",
                                    "notes": "Release candidate."}),
            ),
            twin=("clone", {"branch": "experiment/fast-path"}),
            A=ActT("deploy_build", "build", {"environment": "production"},
                   core=("build.tests_passed", "build.signed", "build.status", "build.service_id",
                         "chg.status", "chg.window_open"),
                   extra=(("freeze.active",), ("incident.severity",), ("svc.status",)),
                   flips=(("build.tests_passed", False, "the build's tests failed"),
                          ("build.signed", False, "the build is not signed"),
                          ("chg.status", "pending", "the change request is not approved yet"),
                          ("freeze.active", True, "a production deploy freeze is active"),
                          ("svc.status", "degraded", "the service is degraded; deploys are paused"))),
            B=ActT("run_smoke_tests", "svc", {"job_id": ("out", "A")}, core=("build.status", "svc.tier")),
            C=_ENG_C, D=_ENG_D,
            ctx={
                "V1": "Change {chg}: deploy build {build} ({build.version}) of {svc} to 'production' if its "
                      "tests passed, it is signed and the change is approved and in window.",
                "V2": "Change {chg}: deploy build {build} of {svc} to 'production'; once the build shows as "
                      "deployed, run the smoke tests against the deploy job.",
                "V3": "Change {chg}: deploy build {build} of {svc} to 'production' and, once deployed, run "
                      "smoke tests on the deploy job; post a 'maintenance' notice for team {team}; after "
                      "both, close the change request citing the notice.",
            },
        ),
        Template(
            "host_drain",
            roles=_ENG_ROLES + (
                ("host", "host", {"service_id": "@svc", "region": pick("eu-west-2", "us-east-1"),
                                  "status": "degraded", "drained": False, "rack": lambda r: f"R{r.randint(10, 99)}",
                                  "notes": "ECC errors reported by the BMC."}),
            ),
            twin=("clone", {"rack": "R07"}),
            A=ActT("drain_host", "host", {"reason": "hardware_fault"},
                   core=("host.status", "host.drained", "host.service_id", "svc.healthy_replicas",
                         "svc.min_replicas", "chg.status"),
                   extra=(("freeze.active",), ("incident.status",), ("team.on_call_ack",)),
                   flips=(("host.drained", True, "the host is already drained"),
                          ("host.status", "healthy", "the host is healthy; there is nothing to drain"),
                          ("svc.healthy_replicas", 3, "draining would leave fewer healthy replicas than the minimum"),
                          ("chg.status", "rejected", "the change request was rejected"),
                          ("team.on_call_ack", False, "on-call has not acknowledged the change"))),
            B=ActT("decommission_host", "host", {"drain_job_id": ("out", "A")}, core=("host.drained", "host.region")),
            C=_ENG_C, D=_ENG_D,
            ctx={
                "V1": "Host {host} of {svc} is reporting hardware faults. Under change {chg}, drain it "
                      "('hardware_fault') if it is degraded, not yet drained and the service keeps its "
                      "minimum healthy replicas.",
                "V2": "Under change {chg}: drain host {host} of {svc} ('hardware_fault'); once it shows as "
                      "drained, decommission it citing the drain job.",
                "V3": "Under change {chg}: drain host {host} of {svc} ('hardware_fault') and, once drained, "
                      "decommission it citing the drain job; post a 'maintenance' notice for team {team}; "
                      "after both, close the change request citing the notice.",
            },
        ),
    ),
)
