"""Hosts for cluster tests, made on this machine from Linux network and mount namespaces (tests run as root).

A `Host` is a network namespace joined to the test's own (the client's) by a veth pair on a /30 of its own: the
client reaches the host at `host.ip` and the host reaches the client at `host.peer_ip`, while neither reaches the
other's loopback. `Host.spawn` starts a process there in a mount namespace of its own, where the folders named in
`hide` are empty (a tmpfs over each), so the process sees none of the client's files in them.

A `Network` is a switch (a Linux bridge in the client's namespace, at 10.214.<index>.1/24) with hosts on it: every
host reaches every other host and the client at the bridge's address, as machines on one LAN do, and a host's link
can be cut and mended (`Host.cut`, `Host.mend`) while its processes run.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Host:
    name: str  # the network namespace
    ip: str  # this host's address, as the client reaches it
    peer_ip: str  # the client's address, as this host reaches it
    link: str  # the veth end left in the client's namespace

    @classmethod
    def make(cls, name: str, index: int) -> Host:
        """A host 10.213.<index>.2 joined to the client's 10.213.<index>.1 (index 0-255, unique among live hosts)."""
        link = f"tt{index}-{os.getpid() % 100000}"
        return cls._build(
            name,
            link,
            f"10.213.{index}.2",
            f"10.213.{index}.1",
            30,
            ["ip", "addr", "add", f"10.213.{index}.1/30", "dev", link],
        )

    @classmethod
    def _build(cls, name: str, link: str, ip: str, peer_ip: str, prefix_len: int, attach: list[str]) -> Host:
        """The namespace `name`-<pid> at `ip`/`prefix_len`, its eth0 the peer of `link`, which `attach` joins to the
        client's side (an address of its own, or a bridge)."""
        host = cls(f"{name}-{os.getpid()}", ip, peer_ip, link)
        host.remove()  # a namespace left by a killed earlier session of this pid
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
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)
        subprocess.run(["ip", "link", "del", self.link], capture_output=True)


@dataclass
class Network:
    bridge: str
    prefix: str  # "10.214.<index>": the client is .1, hosts .2 and up
    hosts: list[Host]

    @classmethod
    def make(cls, index: int) -> Network:
        """A bridge at 10.214.<index>.1/24 (index 0-255, unique among live networks)."""
        net = cls(f"ttbr{os.getpid() % 100000}", f"10.214.{index}", [])
        subprocess.run(["ip", "link", "del", net.bridge], capture_output=True)  # left by a killed session of this pid
        for cmd in (
            ["ip", "link", "add", net.bridge, "type", "bridge"],
            ["ip", "addr", "add", f"{net.prefix}.1/24", "dev", net.bridge],
            ["ip", "link", "set", net.bridge, "up"],
        ):
            subprocess.run(cmd, check=True, capture_output=True, text=True)
        return net

    def host(self, name: str) -> Host:
        """A host at 10.214.<index>.<n> on this network (n = 2, 3, ...)."""
        n = len(self.hosts) + 2
        link = f"tv{n}-{os.getpid() % 100000}"
        host = Host._build(
            name, link, f"{self.prefix}.{n}", f"{self.prefix}.1", 24, ["ip", "link", "set", link, "master", self.bridge]
        )
        self.hosts.append(host)
        return host

    def remove(self) -> None:
        for host in self.hosts:
            host.remove()
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
