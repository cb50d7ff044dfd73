"""The commands that reproduce a run by hand: fedprobe's own probe with the run's parameters,
and the grid tool a site admin already has for the protocol (xrdcp, curl, davix-get,
globus-url-copy). Never a secret: a credential is a variable the admin sets
($BEARER_TOKEN, $BEARER_TOKEN_FILE, $X509_USER_PROXY), and URLs lose their user part and
query (which may carry a token)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from webapp.campaigns.models import Run
from webapp.campaigns.run_table import without_userinfo
from workers.engine.credentials import CredentialKind
from workers.engine.protocols import FILE, GRIDFTP, HTTP, XROOT, protocol_of

GRID_CA_DIR = "/etc/grid-security/certificates"
TOKEN_KINDS = (CredentialKind.TOKEN, CredentialKind.OAUTH_CLIENT)

# Where the variables the commands read come from, for an admin who never used fedprobe.
CREDENTIAL_HELP = {
    "token": (
        "The commands read a bearer token from $BEARER_TOKEN (curl) or the file "
        "$BEARER_TOKEN_FILE (xrdcp, the probe): get one with read access to this storage from "
        "your VO's token issuer (for example `oidc-token ACCOUNT` with oidc-agent, or "
        "htgettoken), and never paste it into the ticket."
    ),
    "x509": (
        "The commands read an X.509 proxy from $X509_USER_PROXY: make one with "
        "`voms-proxy-init --voms VO` (or `grid-proxy-init`), and never attach it to the ticket."
    ),
    "none": "The endpoint is read anonymously: the commands need no credential.",
}


@dataclass(frozen=True)
class Command:
    """One command line to paste into a shell, and what it shows."""

    tool: str
    line: str
    note: str


def credential_of(kind: str) -> str:
    """ "token", "x509" or "none": what an endpoint of `kind` presents."""
    if kind in TOKEN_KINDS:
        return "token"
    if kind == CredentialKind.X509_PROXY:
        return "x509"
    return "none"


def reproduce_commands(run: Run) -> list[Command]:
    """fedprobe's probe with the run's parameters, then the protocol's own tool."""
    credential = credential_of(run.endpoint.credential_kind)
    url = public_url(run.test_file.url)
    return [_probe(run, credential), *_tool_commands(run, url, credential)]


def public_url(url: str) -> str:
    """The URL as a command may show it: no user part, no query."""
    return without_userinfo(url)


def _probe(run: Run, credential: str) -> Command:
    urls = [public_url(f.url) for f in run.files_to_read()]
    options = [
        ("--method", run.method),
        ("--pattern", run.pattern),
        ("--read-size", str(run.read_size)),
        ("--fraction", f"{run.fraction:g}"),
        ("--clients", str(run.clients)),
        ("--files", str(run.files)),
        ("--depth", str(run.depth)),
        ("--vector-size", str(run.vector_size)),
        ("--skip", str(run.skip)),
        ("--readahead", str(run.readahead)),
        ("--streams", str(run.streams)),
        ("--seed", str(run.pk)),
    ]
    if run.deadline_s:
        options.append(("--timeout", f"{run.deadline_s:g}"))
    if run.test_file.adler32 and len(urls) == 1:
        options.append(("--adler32", run.test_file.adler32))
    if credential != "none":
        # The run presented its credential to these redirect targets too (engine_params).
        options += [("--credential-host", host) for host in run.endpoint.credential_hosts]
    words = ["python", "-m", "workers.engine", *urls]
    words += [word for option in options for word in option]
    auth = {
        "token": '--token-file "$BEARER_TOKEN_FILE"',
        "x509": '--proxy "$X509_USER_PROXY"',
        "none": "--anonymous",
    }[credential]
    line = f"{shlex.join(words)} {auth}"
    note = (
        "fedprobe's probe with this run's parameters, from a checkout of fedprobe with its "
        "requirements installed (its README); exit 0 when the run succeeds, 1 when it "
        "fails, with the error's class and message"
    )
    return Command("fedprobe probe", line, note)


def _tool_commands(run: Run, url: str, credential: str) -> list[Command]:
    scheme = urlsplit(url).scheme
    try:
        protocol = protocol_of(scheme)
    except ValueError:
        return []
    if protocol is XROOT:
        return [_xrdcp(url, credential)]
    if protocol is HTTP:
        return _http(url, credential, run.read_size)
    if protocol is GRIDFTP:
        return [_globus_url_copy(url, credential)]
    if protocol is FILE:
        path = urlsplit(url).path
        line = shlex.join(["dd", f"if={path}", "of=/dev/null", f"bs={run.read_size}"])
        return [Command("dd", line, "reads the local file whole, on the vantage point's host")]
    return []


def _xrdcp(url: str, credential: str) -> Command:
    env = {
        "token": 'BEARER_TOKEN_FILE="$BEARER_TOKEN_FILE" XrdSecPROTOCOL=ztn ',
        "x509": f'X509_USER_PROXY="$X509_USER_PROXY" X509_CERT_DIR={GRID_CA_DIR} '
        "XrdSecPROTOCOL=gsi ",
        "none": "",
    }[credential]
    line = env + shlex.join(["xrdcp", "--force", "--nopbar", url, "/dev/null"])
    return Command("xrdcp", line, "copies the whole file to nowhere; exit 0 when it can be read")


def _http(url: str, credential: str, read_size: int) -> list[Command]:
    https = urlunsplit(("https" if urlsplit(url).scheme != "http" else "http", *urlsplit(url)[1:]))
    # Grid servers' certificates are signed by the IGTF's CAs, found in the grid's CA folder
    # rather than in the system's store.
    capath = f" --capath {GRID_CA_DIR}" if https.startswith("https:") else ""
    curl_auth = {
        "token": ' -H "Authorization: Bearer $BEARER_TOKEN"',
        "x509": ' --cert "$X509_USER_PROXY" --key "$X509_USER_PROXY"',
        "none": "",
    }[credential] + capath
    curl = (
        shlex.join(["curl", "--fail", "--silent", "--show-error", "--location", "-o", "/dev/null"])
        + f" -r 0-{read_size - 1}"
        + " -w '%{http_code} %{size_download} B in %{time_total} s\\n'"
        + curl_auth
        + f" {shlex.quote(https)}"
    )
    read = Command("curl", curl, "reads the first block (one range request); exit 0 when it can")
    if credential == "token":
        # davix-get sends a header given with -H again to wherever the server redirects it,
        # a host nobody listed for the token; curl drops Authorization on another host.
        return [read]
    davix_auth = {"x509": ' --cert "$X509_USER_PROXY"', "none": ""}[credential] + capath
    davix = f"davix-get{davix_auth} {shlex.quote(url)} /dev/null"
    return [read, Command("davix-get", davix, "copies the whole file to nowhere (davix)")]


def _globus_url_copy(url: str, credential: str) -> Command:
    env = 'X509_USER_PROXY="$X509_USER_PROXY" ' if credential == "x509" else ""
    line = env + shlex.join(["globus-url-copy", "-vb", url, "file:///dev/null"])
    return Command("globus-url-copy", line, "copies the whole file to nowhere over GridFTP")
