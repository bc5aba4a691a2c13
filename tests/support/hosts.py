"""Hosts for cluster tests, made on this machine from Linux network and mount namespaces (tests run as root).

A `Host` is a network namespace joined to the test's own (the client's) by a veth pair on a /30 of its own: the
client reaches the host at `host.ip` and the host reaches the client at `host.peer_ip`, while neither reaches the
other's loopback. `Host.spawn` starts a process there in a mount namespace of its own, where the folders named in
`hide` are empty (a tmpfs over each), so the process sees none of the client's files in them.

A `Network` is a switch (a Linux bridge in the client's namespace, at 10.214.<index>.1/24) with hosts on it: every
host reaches every other host and the client at the bridge's address, as machines on one LAN do, and a host's link
can be cut and mended (`Host.cut`, `Host.mend`) while its processes run.

The <index> of a `Host.make` host or a `Network` is claimed (tests/support/harness.py `claim`) for as long as it
lives, and its namespaces, links and subnet are named after that index: two test suites on one machine (or two
tests in one) never make the same one, and a suite killed mid-way leaves ones the next claimant of its index clears.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.support.harness import claim, release

INDEXES = range(256)  # the third byte of a subnet: 10.213.<index>.0/30 for a Host.make host, 10.214.<index>.0/24


@dataclass
class Host:
    name: str  # the network namespace
    ip: str  # this host's address, as the client reaches it
    peer_ip: str  # the client's address, as this host reaches it
    link: str  # the veth end left in the client's namespace
    index: int | None = None  # the claimed index of a Host.make host, released by remove(); None on a Network

    @classmethod
    def make(cls, name: str, index: int | None = None) -> Host:
        """A host 10.213.<i>.2 joined to the client's 10.213.<i>.1, where i is an index 0-255 claimed for this host
        until remove(): `index` if no other live host holds it, else another."""
        index = _claim_subnet("host", "10.213", index, lambda i: f"tth{i}")
        link = f"tth{index}"
        try:
            host = cls._build(
                f"{name}-h{index}",
                link,
                f"10.213.{index}.2",
                f"10.213.{index}.1",
                30,
                ["ip", "addr", "add", f"10.213.{index}.1/30", "dev", link],
            )
        except BaseException:
            release("host", index)
            raise
        host.index = index
        return host

    @classmethod
    def _build(cls, name: str, link: str, ip: str, peer_ip: str, prefix_len: int, attach: list[str]) -> Host:
        """The namespace `name` at `ip`/`prefix_len`, its eth0 the peer of `link`, which `attach` joins to the
        client's side (an address of its own, or a bridge)."""
        host = cls(name, ip, peer_ip, link)
        host._clear()  # a namespace and link left by a killed suite that held this index
        for cmd in (
            ["ip", "netns", "add", host.name],
            ["ip", "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", host.name],
            attach,
            ["ip", "link", "set", link, "up"],
            *(
                ["ip", "netns", "exec", host.name, *c]
                for c in (
                    ["ip", "addr", "add", f"{ip}/{prefix_len}", "dev", "eth0"],
                    ["ip", "link", "set", "eth0", "up"],
                    ["ip", "link", "set", "lo", "up"],
                )
            ),
        ):
            subprocess.run(cmd, check=True, capture_output=True, text=True)
        return host

    def spawn(self, argv: list[str], *, hide: list[Path], env: dict[str, str], cwd: Path, log) -> subprocess.Popen:
        """Start `argv` on this host, with each folder in `hide` empty; in a process group of its own."""
        mounts = "".join(f"mount -t tmpfs tmpfs {shlex.quote(str(p))} && " for p in hide)
        script = f"{mounts}exec {shlex.join(argv)}"
        return subprocess.Popen(
            ["ip", "netns", "exec", self.name, "unshare", "--mount", "--propagation", "private", "sh", "-c", script],
            env=env,
            cwd=cwd,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def cut(self) -> None:
        """Take this host's link down: its processes run on, unreachable, as behind a pulled cable."""
        subprocess.run(["ip", "link", "set", self.link, "down"], check=True, capture_output=True)

    def mend(self) -> None:
        subprocess.run(["ip", "link", "set", self.link, "up"], check=True, capture_output=True)

    def remove(self) -> None:
        self._clear()
        if self.index is not None:
            release("host", self.index)
            self.index = None

    def _clear(self) -> None:
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)
        subprocess.run(["ip", "link", "del", self.link], capture_output=True)


def _claim_subnet(kind: str, prefix: str, prefer: int | None, link: Callable[[int], str]) -> int:
    """An index claimed for `kind` whose subnet <prefix>.<index>.0/24 no interface on this machine has an address
    in, once the interface `link(index)` that a killed suite which held the index left is removed: one that a suite
    which does not claim (an older checkout's) holds is passed over, and stays claimed by this process so that it is
    not tried again."""
    while True:
        index = claim(kind, INDEXES, prefer)
        subprocess.run(["ip", "link", "del", link(index)], capture_output=True)
        shown = subprocess.run(
            ["ip", "-o", "addr", "show", "to", f"{prefix}.{index}.0/24"], capture_output=True, text=True, check=True
        )
        if not shown.stdout.strip():
            return index
        prefer = None


@dataclass
class Network:
    bridge: str
    prefix: str  # "10.214.<index>": the client is .1, hosts .2 and up
    hosts: list[Host]
    index: int  # claimed for this network until remove()

    @classmethod
    def make(cls, index: int | None = None) -> Network:
        """A bridge at 10.214.<i>.1/24, where i is an index 0-255 claimed for this network until remove(): `index`
        if no other live network holds it, else another."""
        index = _claim_subnet("net", "10.214", index, lambda i: f"ttbr{i}")
        net = cls(f"ttbr{index}", f"10.214.{index}", [], index)
        try:
            # hosts a killed suite that held this index left are cleared as each host of this network is made
            for cmd in (
                ["ip", "link", "add", net.bridge, "type", "bridge"],
                ["ip", "addr", "add", f"{net.prefix}.1/24", "dev", net.bridge],
                ["ip", "link", "set", net.bridge, "up"],
            ):
                subprocess.run(cmd, check=True, capture_output=True, text=True)
        except BaseException:
            net.remove()
            raise
        return net

    def host(self, name: str) -> Host:
        """A host at 10.214.<index>.<n> on this network (n = 2, 3, ...), its namespace `name`-n<index>."""
        n = len(self.hosts) + 2
        link = f"tv{n}-{self.index}"
        host = Host._build(
            f"{name}-n{self.index}",
            link,
            f"{self.prefix}.{n}",
            f"{self.prefix}.1",
            24,
            ["ip", "link", "set", link, "master", self.bridge],
        )
        self.hosts.append(host)
        return host

    def remove(self) -> None:
        for host in self.hosts:
            host.remove()
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
        release("net", self.index)
