#!/usr/bin/env python3
"""A link impairment for the tests, where the kernel has no netem (sch_netem is not built here).

Relays Ethernet frames between two interfaces of one network namespace in both directions,
holding each for DELAY milliseconds and dropping a fraction LOSS of them (independently, per
frame), with AF_PACKET sockets. The test harness puts it between a host's link and the switch's
bridge. It reads "DELAY_MS LOSS" from CONTROL every 100 ms, so a test changes it while it runs.

  impair.py IF_A IF_B CONTROL

The interfaces must have checksum and segmentation offloads off (ethtool -K IF tx off tso off
gso off gro off): a frame relayed by a packet socket keeps whatever the kernel left undone.
"""
import heapq
import random
import socket
import sys
import threading
import time

ETH_P_ALL = 3


def open_socket(name):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((name, 0))
    return s


class Settings:
    def __init__(self, path):
        self.path = path
        self.delay_s = 0.0
        self.loss = 0.0

    def poll(self):
        while True:
            try:
                with open(self.path) as f:
                    parts = f.read().split()
                self.delay_s = float(parts[0]) / 1000.0
                self.loss = float(parts[1])
            except (OSError, ValueError, IndexError):
                pass
            time.sleep(0.1)


def relay(src, dst, settings):
    queue = []
    cv = threading.Condition()

    def sender():
        while True:
            with cv:
                while not queue:
                    cv.wait()
                due, _, frame = queue[0]
                now = time.monotonic()
                if due > now:
                    cv.wait(due - now)
                    continue
                heapq.heappop(queue)
            try:
                dst.send(frame)
            except OSError:
                pass  # the far side is down: the frame is lost, as on a wire

    threading.Thread(target=sender, daemon=True).start()
    seq = 0
    while True:
        frame, address = src.recvfrom(65535)
        if address[2] == socket.PACKET_OUTGOING:
            continue  # our own sends on this interface
        if settings.loss > 0 and random.random() < settings.loss:
            continue
        seq += 1
        with cv:
            heapq.heappush(queue, (time.monotonic() + settings.delay_s, seq, frame))
            cv.notify()


def main():
    a, b, control = sys.argv[1], sys.argv[2], sys.argv[3]
    settings = Settings(control)
    threading.Thread(target=settings.poll, daemon=True).start()
    sa, sb = open_socket(a), open_socket(b)
    threading.Thread(target=relay, args=(sa, sb, settings), daemon=True).start()
    relay(sb, sa, settings)


if __name__ == "__main__":
    main()
