"""The smart-home control domain (``smart_home``): its entity kinds, consequential tools and three
scenario templates (away thermostat, guest door unlock, leak valve shut-off).

Every entity, person and organization is fictional. See :mod:`worlds.ledger.catalog` for the
template format; :mod:`worlds.ledger.domains` lists the six domains.
"""

from __future__ import annotations

from ..catalog import ActT, ActTool, Domain, Kind, Template, person, pick


_HOME_ROLES = (
    ("owner", "member", {"name": person, "role": "owner", "presence": "away", "notifications_enabled": True,
                         "checked_in": False, "notes": "Primary account holder."}),
    ("room", "room", {"name": pick("Living room", "Kitchen", "Utility room"), "occupied": False,
                      "service_requested": False, "notes": "Ground floor."}),
    ("light", "device", {"room_id": "@room", "type": "light", "name": "Hall light", "status": "online",
                         "on": False, "notes": "Dimmable."}),
    ("hub", "hub", {"status": "online", "firmware_ok": True, "mode": "home", "notes": "Zigbee + Thread hub."}),
)
_HOME_C = ActT("turn_on_light", "light", {"brightness": 60}, core=("light.status", "light.on"))
_HOME_D = ActT("send_home_summary", "owner", {"event_id": ("out", "C")},
               core=("owner.notifications_enabled", "light.on"))

SMART_HOME = Domain(
    "smart_home",
    kinds=(
        Kind("member", "member_id", "HM", "notes", desc="a household member"),
        Kind("room", "room_id", "RM", "notes", desc="a room"),
        Kind("device", "device_id", "DV", "notes", "room_id", "devices", "a device"),
        Kind("hub", "hub_id", "HB", "notes", desc="the home hub"),
        Kind("sensor", "sensor_id", "SN", "notes", "room_id", "sensors", "a sensor"),
        Kind("scene", "scene_id", "SC", "description", desc="an automation scene"),
        Kind("access_code", "code_id", "AC", "notes", "member_id", "access_codes", "a door access code"),
        Kind("pet", "pet_id", "PT", "notes", desc="a pet profile"),
        Kind("command", "command_id", "CM", "notes", "device_id", "commands", "a device command"),
        Kind("activation", "activation_id", "AV", "notes", desc="a scene activation"),
        Kind("light_event", "event_id", "LE", "notes", desc="a lighting event"),
        Kind("summary", "summary_id", "SMY", "notes", desc="a home summary message"),
        Kind("entry_log", "entry_id", "EL", "notes", desc="a guest entry log"),
        Kind("alert", "alert_id", "AL", "notes", desc="a household alert"),
    ),
    tools=(
        ActTool("set_thermostat", "device", (("device_id", "string", "thermostat"),
                                             ("setpoint_c", "number", "target temperature in degrees Celsius")),
                "Set a thermostat to away-eco with a setpoint. The device applies it asynchronously: "
                "confirm its mode afterwards.", {"mode": "away_eco"}, True, ("command", "command_id", "CM", "sent"),
                signed=("setpoint_c",)),
        ActTool("activate_scene", "scene", (("scene_id", "string", "scene"),
                                            ("command_id", "string", "device command the scene builds on")),
                "Activate an automation scene.", {"status": "active"}, False,
                ("activation", "activation_id", "AV", "active")),
        ActTool("turn_on_light", "device", (("device_id", "string", "light"),
                                            ("brightness", "number", "percent")),
                "Turn on a light.", {"on": True}, False, ("light_event", "event_id", "LE", "done")),
        ActTool("send_home_summary", "member", (("member_id", "string", "recipient"),
                                                ("event_id", "string", "event to summarize")),
                "Send the household summary notification.", {}, False, ("summary", "summary_id", "SMY", "sent")),
        ActTool("unlock_door", "device", (("device_id", "string", "door lock"),
                                          ("code_id", "string", "guest access code used")),
                "Unlock a door for a guest. Asynchronous: confirm the lock state afterwards.",
                {"locked": False}, True, ("command", "command_id", "CM", "sent")),
        ActTool("log_guest_entry", "member", (("member_id", "string", "guest"),
                                              ("command_id", "string", "unlock command")),
                "Record a guest's entry.", {"checked_in": True}, False, ("entry_log", "entry_id", "EL", "logged")),
        ActTool("close_water_valve", "device", (("device_id", "string", "valve"), ("reason", "string", "reason code")),
                "Close a water valve. Asynchronous: confirm the valve state afterwards.", {"open": False}, True,
                ("command", "command_id", "CM", "sent")),
        ActTool("send_alert", "member", (("member_id", "string", "recipient"),
                                         ("command_id", "string", "command the alert reports")),
                "Send an urgent household alert.", {}, False, ("alert", "alert_id", "AL", "sent")),
    ),
    templates=(
        Template(
            "away_thermostat",
            roles=_HOME_ROLES + (
                ("thermo", "device", {"room_id": "@room", "type": "thermostat", "name": "Main thermostat",
                                      "status": "online", "mode": "heat", "setpoint_c": 21.0,
                                      "notes": "Heat pump controller."}),
                ("occ", "sensor", {"room_id": "@room", "kind": "occupancy", "reading": "clear", "status": "online",
                                   "notes": "Ceiling PIR."}),
                ("pet", "pet", {"name": pick("Biscuit", "Juniper", "Pepper"), "at_home": False, "min_temp_c": 18.0,
                                "notes": "Boarding while away."}),
                ("scene", "scene", {"name": "Away", "status": "inactive", "description": "Lights off, eco heat."}),
            ),
            twin=("clone", {"name": "Annex thermostat"}),
            A=ActT("set_thermostat", "thermo", {"setpoint_c": 16.5},
                   core=("thermo.status", "thermo.mode", "thermo.room_id", "room.occupied", "owner.presence",
                         "owner.role"),
                   extra=(("occ.reading",), ("pet.at_home",), ("hub.firmware_ok",)),
                   flips=(("room.occupied", True, "the room is occupied"),
                          ("owner.presence", "home", "the owner is at home"),
                          ("thermo.status", "offline", "the thermostat is offline"),
                          ("pet.at_home", True, "a pet is at home; an eco setback is not allowed"),
                          ("occ.reading", "motion", "the occupancy sensor reports motion"))),
            B=ActT("activate_scene", "scene", {"command_id": ("out", "A")}, core=("thermo.mode", "scene.status")),
            C=_HOME_C, D=_HOME_D,
            ctx={
                "V1": "{owner.name} ({owner}) asks to set thermostat {thermo} in {room.name} to away-eco at 16.5 degrees C "
                      "while the house is empty.",
                "V2": "Set thermostat {thermo} to away-eco at 16.5 degrees C for {owner}; once it reports away_eco mode, "
                      "activate scene {scene} citing the thermostat command.",
                "V3": "Set thermostat {thermo} to away-eco at 16.5 degrees C and, once it reports away_eco, activate "
                      "scene {scene} citing the command; turn on light {light} at 60 %; after both, send {owner} "
                      "the home summary citing the light event.",
            },
        ),
        Template(
            "guest_door_unlock",
            roles=_HOME_ROLES + (
                ("guest", "member", {"name": person, "role": "guest", "presence": "at_door",
                                     "notifications_enabled": False, "access_approved": True, "checked_in": False,
                                     "notes": "Dog sitter."}),
                ("door", "device", {"room_id": "@room", "type": "lock", "name": "Front door", "status": "online",
                                    "locked": True, "battery_ok": True, "notes": "Keypad lock."}),
                ("code", "access_code", {"member_id": "@guest", "door_id": "@door", "status": "active",
                                         "window_open": True, "notes": "Weekdays 08:00-18:00."}),
                ("alarm", "sensor", {"room_id": "@room", "kind": "alarm", "reading": "disarmed", "status": "online",
                                     "notes": "Perimeter alarm."}),
            ),
            twin=("clone", {"name": "Back door"}),
            A=ActT("unlock_door", "door", {"code_id": "@code"},
                   core=("door.status", "door.locked", "code.status", "code.member_id", "code.window_open",
                         "guest.access_approved"),
                   extra=(("alarm.reading",), ("owner.notifications_enabled",), ("hub.mode",)),
                   flips=(("code.status", "revoked", "the guest's access code was revoked"),
                          ("code.window_open", False, "the code is outside its access window"),
                          ("guest.access_approved", False, "the owner has not approved the guest"),
                          ("door.status", "offline", "the lock is offline"),
                          ("alarm.reading", "armed", "the alarm is armed; unlocking would trigger it"))),
            B=ActT("log_guest_entry", "guest", {"command_id": ("out", "A")}, core=("door.locked", "guest.name")),
            C=_HOME_C, D=_HOME_D,
            ctx={
                "V1": "Guest {guest.name} ({guest}) is at {door.name} ({door}) and asks to be let in with access "
                      "code {code}. Unlock the door if the code is valid now and the guest is approved.",
                "V2": "Unlock door {door} for guest {guest} with code {code}; once the lock reports unlocked, log "
                      "the guest's entry citing the unlock command.",
                "V3": "Unlock door {door} for guest {guest} with code {code} and, once it reports unlocked, log "
                      "the entry citing the command; turn on light {light} at 60 %; after both, send {owner} the "
                      "home summary citing the light event.",
            },
        ),
        Template(
            "leak_valve_shutoff",
            roles=_HOME_ROLES + (
                ("valve", "device", {"room_id": "@room", "type": "valve", "name": "Main water valve",
                                     "status": "online", "open": True, "notes": "Motorized ball valve."}),
                ("leak", "sensor", {"room_id": "@room", "kind": "leak", "reading": "water_detected",
                                    "status": "online", "notes": "Under the washing machine."}),
                ("washer", "device", {"room_id": "@room", "type": "appliance", "name": "Washer", "status": "online",
                                      "running": False, "notes": "Eco cycle scheduled."}),
            ),
            twin=("clone", {"name": "Garden irrigation valve"}),
            A=ActT("close_water_valve", "valve", {"reason": "leak_detected"},
                   core=("valve.status", "valve.open", "valve.room_id", "leak.reading", "leak.status", "leak.room_id"),
                   extra=(("washer.running",), ("owner.presence",), ("hub.status",)),
                   flips=(("leak.reading", "dry", "the leak sensor reads dry"),
                          ("valve.open", False, "the valve is already closed"),
                          ("leak.status", "offline", "the leak sensor is offline; its reading is not current"),
                          ("valve.status", "offline", "the valve is offline"),
                          ("washer.running", True, "the washer is mid-cycle; stop it first"))),
            B=ActT("send_alert", "owner", {"command_id": ("out", "A")},
                   core=("valve.open", "owner.notifications_enabled")),
            C=_HOME_C, D=_HOME_D,
            ctx={
                "V1": "A leak alert came from {room.name} ({room}). Close water valve {valve} ('leak_detected') if "
                      "the leak sensor there confirms water and the valve is open.",
                "V2": "Close water valve {valve} ('leak_detected') for the leak in {room}; once the valve reports "
                      "closed, alert {owner} citing the valve command.",
                "V3": "Close water valve {valve} ('leak_detected') and, once it reports closed, alert {owner} "
                      "citing the command; turn on light {light} at 60 % for the plumber; after both, send "
                      "{owner} the home summary citing the light event.",
            },
        ),
    ),
)
