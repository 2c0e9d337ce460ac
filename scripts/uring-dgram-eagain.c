/*
 * io_uring's retry of a Unix datagram send whose peer's queue was full: the CQE says 0 and
 * the peer receives an empty datagram (seen on Linux 6.18).
 *
 * unix_dgram_sendmsg() copies the payload out of msg->msg_iter into the new skb, and only then
 * finds the peer's receive queue full (net.unix.max_dgram_qlen, checked when the peer is not
 * connected back to the sender) and returns -EAGAIN. io_uring keeps the msghdr and its iov_iter
 * in the request's async data across the poll-driven retry without rewinding it, so the retry
 * sends what is left of the iterator: nothing. A send with MSG_DONTWAIT in the SQE is never
 * retried by the kernel (REQ_F_NOWAIT: the CQE says -EAGAIN) and the caller starts afresh.
 *
 * Raw system calls only (no liburing). Build and run:
 *     cc -O2 -Wall -o /tmp/uring-dgram-eagain scripts/uring-dgram-eagain.c
 *     /tmp/uring-dgram-eagain
 * Exit status 1 if the kernel delivered a short or empty datagram (the bug), 0 if not.
 *
 * On 6.18.44 (x86_64): the socketpair case is whole (its EAGAIN comes from the sender's
 * buffer, before the copy); the unconnected IORING_OP_SENDMSG and the connected IORING_OP_SEND
 * both complete with 0 and deliver a 0-byte datagram; with MSG_DONTWAIT every case completes
 * with -EAGAIN and nothing is sent.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/io_uring.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#define LEN 100

static int ring_fd;
static unsigned *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
static struct io_uring_sqe *sqes;
static struct io_uring_cqe *cqes;

static void die(const char *what)
{
	perror(what);
	exit(2);
}

static void ring_setup(void)
{
	struct io_uring_params p;
	memset(&p, 0, sizeof p);
	ring_fd = syscall(__NR_io_uring_setup, 8, &p);
	if (ring_fd < 0)
		die("io_uring_setup");
	size_t sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	size_t cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	char *sq = mmap(0, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring_fd,
			IORING_OFF_SQ_RING);
	char *cq = mmap(0, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring_fd,
			IORING_OFF_CQ_RING);
	sqes = mmap(0, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_POPULATE, ring_fd, IORING_OFF_SQES);
	if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED)
		die("mmap");
	sq_tail = (unsigned *)(sq + p.sq_off.tail);
	sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
	sq_array = (unsigned *)(sq + p.sq_off.array);
	cq_head = (unsigned *)(cq + p.cq_off.head);
	cq_tail = (unsigned *)(cq + p.cq_off.tail);
	cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
	cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
}

/* Submits one SQE (filled by the caller through the returned pointer, then `submit`). */
static struct io_uring_sqe *sqe_get(void)
{
	unsigned t = *sq_tail, i = t & *sq_mask;
	memset(&sqes[i], 0, sizeof sqes[i]);
	sq_array[i] = i;
	return &sqes[i];
}

static void submit(void)
{
	atomic_store_explicit((_Atomic unsigned *)sq_tail, *sq_tail + 1, memory_order_release);
	if (syscall(__NR_io_uring_enter, ring_fd, 1, 0, 0, NULL, 0) != 1)
		die("io_uring_enter");
}

/* Whether a CQE is waiting. */
static int cq_ready(void)
{
	return *cq_head != atomic_load_explicit((_Atomic unsigned *)cq_tail, memory_order_acquire);
}

/* Waits for one CQE; returns its res. */
static int wait_cqe(void)
{
	if (syscall(__NR_io_uring_enter, ring_fd, 0, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0)
		die("io_uring_enter(wait)");
	unsigned h = *cq_head;
	if (h == atomic_load_explicit((_Atomic unsigned *)cq_tail, memory_order_acquire)) {
		fprintf(stderr, "no CQE\n");
		exit(2);
	}
	int res = cqes[h & *cq_mask].res;
	atomic_store_explicit((_Atomic unsigned *)cq_head, h + 1, memory_order_release);
	return res;
}

/* One case: `tx` fills `rx` until a send fails with EAGAIN; io_uring sends a LEN-byte
 * datagram; the receiver reads one datagram at a time until the CQE comes, then drains the
 * rest. Reports the CQE's result and the datagrams that came after the ones queued first;
 * returns 1 if one was not LEN bytes, or the CQE said a count other than LEN. */
static int one_case(const char *name, int tx, int rx, const struct sockaddr_un *to,
		    socklen_t to_len, int dontwait)
{
	static char payload[LEN], buf[4096];
	memset(payload, 'x', LEN);
	int queued = 0;
	for (;;) {
		ssize_t r = to ? sendto(tx, payload, LEN, MSG_DONTWAIT, (const void *)to, to_len)
			       : send(tx, payload, LEN, MSG_DONTWAIT);
		if (r < 0 && errno == EAGAIN)
			break;
		if (r != LEN)
			die("fill");
		queued++;
	}
	struct msghdr msg;
	struct iovec iov = { payload, LEN };
	memset(&msg, 0, sizeof msg);
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	struct io_uring_sqe *sqe = sqe_get();
	if (to) {
		msg.msg_name = (void *)to;
		msg.msg_namelen = to_len;
		sqe->opcode = IORING_OP_SENDMSG;
		sqe->addr = (unsigned long)&msg;
		sqe->len = 1;
	} else {
		sqe->opcode = IORING_OP_SEND;
		sqe->addr = (unsigned long)payload;
		sqe->len = LEN;
	}
	sqe->fd = tx;
	sqe->msg_flags = MSG_NOSIGNAL | (dontwait ? MSG_DONTWAIT : 0);
	submit();
	usleep(10000);
	/* Make room one datagram at a time until the send completes (a socketpair's sender is
	 * woken only once its buffer is down to a quarter), then drain the rest. */
	int got = 0, empty = 0, last = -1, res = 0, done = 0;
	for (;;) {
		ssize_t r = recv(rx, buf, sizeof buf, MSG_DONTWAIT);
		if (r < 0) {
			if (done)
				break;
			/* Empty: the send must complete now. */
			res = wait_cqe();
			done = 1;
			continue;
		}
		got++;
		empty += r != LEN;
		last = (int)r;
		if (!done) {
			usleep(100);
			if (cq_ready()) {
				res = wait_cqe();
				done = 1;
			}
		}
	}
	int n = got - queued;
	int bad = empty || (res >= 0 && res != LEN);
	printf("%-38s %s: %d queued, CQE res %d, %d more received, the last %d bytes%s\n",
	       name, dontwait ? "MSG_DONTWAIT" : "plain       ", queued, res, n, last,
	       bad ? "  <- BUG" : "");
	return bad;
}

int main(void)
{
	ring_setup();
	int bugs = 0;
	char dir[] = "/tmp/uring-dgram-XXXXXX";
	if (!mkdtemp(dir))
		die("mkdtemp");
	for (int dontwait = 0; dontwait <= 1; dontwait++) {
		/* A socketpair: each end is the other's peer (no queue-length limit; the sender's
		 * buffer fills instead). */
		int sv[2];
		if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv))
			die("socketpair");
		bugs += one_case("socketpair, IORING_OP_SEND", sv[0], sv[1], NULL, 0, dontwait);
		close(sv[0]);
		close(sv[1]);

		/* A bound receiver and an unconnected sender: the receiver's queue length limit. */
		struct sockaddr_un a = { .sun_family = AF_UNIX };
		snprintf(a.sun_path, sizeof a.sun_path, "%s/rx%d", dir, dontwait);
		socklen_t alen = sizeof a;
		int rx = socket(AF_UNIX, SOCK_DGRAM, 0), tx = socket(AF_UNIX, SOCK_DGRAM, 0);
		if (rx < 0 || tx < 0 || bind(rx, (void *)&a, alen))
			die("bind");
		bugs += one_case("unconnected sender, IORING_OP_SENDMSG", tx, rx, &a, alen, dontwait);
		/* The same sender connected to the receiver (which is not connected back). */
		if (connect(tx, (void *)&a, alen))
			die("connect");
		bugs += one_case("connected sender, IORING_OP_SEND", tx, rx, NULL, 0, dontwait);
		close(tx);
		close(rx);
		unlink(a.sun_path);
	}
	rmdir(dir);
	printf(bugs ? "the kernel delivered %d short or empty datagram(s)\n"
		    : "no short or empty datagram (%d)\n",
	       bugs);
	return bugs ? 1 : 0;
}
