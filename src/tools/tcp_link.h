/* The control connection between two hosts' processes of a tool or a test:
 * the receiver listens on a TCP port and takes one connection, the sender
 * connects (retrying while the receiver is not up yet). It then carries what a
 * socketpair carries between forked processes on one host: addresses,
 * barriers, and the end of the peer (the connection closing). */
#ifndef UCT_TM_TOOLS_TCP_LINK_H_
#define UCT_TM_TOOLS_TCP_LINK_H_

#include "fd_io.h"

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace uct_tm {

/* "1".."65535"; false for anything else. */
inline bool parse_tcp_port(const char *text, uint16_t *port) {
    char         *end = nullptr;
    errno               = 0;
    const unsigned long v = strtoul(text, &end, 10);
    if ((errno != 0) || (end == text) || (*end != '\0') || (v == 0) || (v > 65535)) {
        return false;
    }
    *port = static_cast<uint16_t>(v);
    return true;
}

inline void tcp_link_tune(int fd) {
    int one = 1; /* barriers are one-byte round trips */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Listens on `port` (every address) and returns the first connection within
 * `timeout_s` seconds, or -1 with the reason printed after `who`. */
inline int tcp_link_accept(const char *who, uint16_t port, double timeout_s) {
    const int lfd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0) {
        fprintf(stderr, "%s: socket: %s\n", who, strerror(errno));
        return -1;
    }
    int one = 1, zero = 0;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    setsockopt(lfd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)); /* IPv4 too */
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr   = in6addr_any;
    addr.sin6_port   = htons(port);
    if ((bind(lfd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) != 0) || (listen(lfd, 1) != 0)) {
        fprintf(stderr, "%s: cannot listen on port %u: %s\n", who, port, strerror(errno));
        close(lfd);
        return -1;
    }
    pollfd p{lfd, POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(timeout_s * 1000));
    const int fd    = (ready == 1) ? accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC) : -1;
    if (fd < 0) {
        fprintf(stderr, "%s: no peer connected to port %u within %.0f s\n", who, port, timeout_s);
    } else {
        tcp_link_tune(fd);
    }
    close(lfd);
    return fd;
}

/* Connects to `host`:`port`, retrying for `timeout_s` seconds while nobody
 * listens there yet; -1 with the reason printed after `who`. */
inline int tcp_link_connect(const char *who, const char *host, uint16_t port, double timeout_s) {
    addrinfo hints{};
    hints.ai_family   = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo   *list  = nullptr;
    const std::string service = std::to_string(port);
    const int  gai    = getaddrinfo(host, service.c_str(), &hints, &list);
    if (gai != 0) {
        fprintf(stderr, "%s: %s: %s\n", who, host, gai_strerror(gai));
        return -1;
    }
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(static_cast<long>(timeout_s * 1000));
    int err = 0;
    do {
        for (addrinfo *a = list; a != nullptr; a = a->ai_next) {
            const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
            if (fd < 0) {
                err = errno;
                continue;
            }
            if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
                freeaddrinfo(list);
                tcp_link_tune(fd);
                return fd;
            }
            err = errno;
            close(fd);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    } while (std::chrono::steady_clock::now() < deadline);
    freeaddrinfo(list);
    fprintf(stderr, "%s: cannot connect to %s port %u within %.0f s: %s\n", who, host, port,
            timeout_s, strerror(err));
    return -1;
}

/* The sender's command line, so that the receiver runs the same test: a
 * count, then each argument with its length. The receiver bounds both. */
inline bool tcp_link_send_args(int fd, int argc, char **argv) {
    const uint32_t n = static_cast<uint32_t>(argc);
    if (!fd_transfer(fd, const_cast<uint32_t *>(&n), sizeof(n), true)) return false;
    for (int i = 0; i < argc; ++i) {
        uint32_t len = static_cast<uint32_t>(strlen(argv[i]));
        if (!fd_transfer(fd, &len, sizeof(len), true) || !fd_transfer(fd, argv[i], len, true)) {
            return false;
        }
    }
    return true;
}

inline bool tcp_link_recv_args(int fd, std::vector<std::string> *args) {
    constexpr uint32_t kMaxArgs = 256, kMaxArgLength = 4096;
    uint32_t           n;
    if (!fd_transfer(fd, &n, sizeof(n), false) || (n == 0) || (n > kMaxArgs)) return false;
    args->clear();
    for (uint32_t i = 0; i < n; ++i) {
        uint32_t len;
        if (!fd_transfer(fd, &len, sizeof(len), false) || (len > kMaxArgLength)) return false;
        std::string arg(len, '\0');
        if ((len > 0) && !fd_transfer(fd, &arg[0], len, false)) return false;
        args->push_back(std::move(arg));
    }
    return true;
}

/* Both sides of a tool between two hosts: with `host`, connects there and
 * sends our command line; without, takes one connection on `port` and its
 * sender's command line into *peer_args. The control channel, or -1 (said
 * why after `who`). */
inline int tcp_link_meet(const char *who, const char *host, uint16_t port, double timeout_s,
                         int argc, char **argv, std::vector<std::string> *peer_args) {
    if (host != nullptr) {
        const int fd = tcp_link_connect(who, host, port, timeout_s);
        if ((fd >= 0) && !tcp_link_send_args(fd, argc, argv)) {
            fprintf(stderr, "%s: cannot send the options to %s\n", who, host);
            close(fd);
            return -1;
        }
        return fd;
    }
    const int fd = tcp_link_accept(who, port, timeout_s);
    if ((fd >= 0) && !tcp_link_recv_args(fd, peer_args)) {
        fprintf(stderr, "%s: no sender's options on port %u\n", who, port);
        close(fd);
        return -1;
    }
    return fd;
}

/* argv-style pointers into `args` (null-terminated), for getopt. */
inline std::vector<char *> argv_of(std::vector<std::string> &args) {
    std::vector<char *> argv;
    for (std::string &a : args) argv.push_back(&a[0]);
    argv.push_back(nullptr);
    return argv;
}

}  // namespace uct_tm

#endif
