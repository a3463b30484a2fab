#include "ucp_peer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

namespace ucp_test {

namespace {

/* Repeats a read or write until all of the buffer went through (or it failed). */
template <typename Byte, typename Io> bool whole(Byte *data, size_t length, Io io) {
    auto *p = static_cast<std::conditional_t<std::is_const_v<Byte>, const char, char> *>(data);
    while (length > 0) {
        ssize_t n = io(p, length);
        if (n <= 0) {
            return false;
        }
        p += n;
        length -= static_cast<size_t>(n);
    }
    return true;
}

int exit_code(int wstatus) { return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128; }

}  // namespace

Peer::~Peer() {
    if (worker_ != nullptr) {
        ucp_worker_destroy(worker_);
    }
    if (context_ != nullptr) {
        ucp_cleanup(context_);
    }
}

bool Peer::write_all(const void *data, size_t length) {
    return whole(data, length, [this](const void *p, size_t n) { return ::write(fd_, p, n); });
}

bool Peer::read_all(void *data, size_t length) {
    return whole(data, length, [this](void *p, size_t n) { return ::read(fd_, p, n); });
}

bool Peer::open() {
    ucp_params_t params{};
    params.field_mask      = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_TAG_SENDER_MASK;
    params.features        = UCP_FEATURE_TAG;
    params.tag_sender_mask = kSenderMask;
    if (ucp_init(&params, nullptr, &context_) != UCS_OK) {
        return false;
    }
    ucp_worker_params_t wparams{};
    wparams.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode = UCS_THREAD_MODE_SINGLE;
    return ucp_worker_create(context_, &wparams, &worker_) == UCS_OK;
}

bool Peer::connect() {
    ucp_address_t *address = nullptr;
    size_t         length  = 0;
    if (ucp_worker_get_address(worker_, &address, &length) != UCS_OK) {
        return false;
    }
    uint64_t len64 = length;
    bool     sent  = write_all(&len64, sizeof(len64)) && write_all(address, length);
    ucp_worker_release_address(worker_, address);
    uint64_t peer_len = 0;
    if (!sent || !read_all(&peer_len, sizeof(peer_len)) || peer_len > (1u << 20)) {
        return false;
    }
    std::vector<char> peer(peer_len);
    if (!read_all(peer.data(), peer_len)) {
        return false;
    }
    return create_ep(reinterpret_cast<const ucp_address_t *>(peer.data()));
}

void Peer::on_conn_request(ucp_conn_request_h request, void *arg) {
    auto *self = static_cast<Peer *>(arg);
    if (self->conn_request_ == nullptr) {
        self->conn_request_ = request;
    } else {
        ucp_listener_reject(nullptr, request); /* only one peer is expected */
    }
}

bool Peer::connect_sockaddr(bool listen, const char *ip) {
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    if (inet_pton(AF_INET, ip, &sin.sin_addr) != 1) {
        fprintf(stderr, "ucp_peer: %s is not an IPv4 address\n", ip);
        return false;
    }
    ucp_ep_params_t eparams{};
    if (!listen) {
        uint16_t port = 0;
        if (!read_all(&port, sizeof(port))) {
            return false;
        }
        sin.sin_port              = port;
        eparams.field_mask        = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
        eparams.flags             = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
        eparams.sockaddr.addr     = reinterpret_cast<const sockaddr *>(&sin);
        eparams.sockaddr.addrlen  = sizeof(sin);
        return ucp_ep_create(worker_, &eparams, &ep_) == UCS_OK;
    }
    ucp_listener_params_t lparams{};
    lparams.field_mask         = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
                                 UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    lparams.sockaddr.addr      = reinterpret_cast<const sockaddr *>(&sin);
    lparams.sockaddr.addrlen   = sizeof(sin);
    lparams.conn_handler.cb    = on_conn_request;
    lparams.conn_handler.arg   = this;
    ucp_listener_h listener    = nullptr;
    if (ucp_listener_create(worker_, &lparams, &listener) != UCS_OK) {
        return false;
    }
    ucp_listener_attr_t attr{};
    attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    bool ok         = ucp_listener_query(listener, &attr) == UCS_OK;
    if (ok) {
        const uint16_t port = reinterpret_cast<const sockaddr_in *>(&attr.sockaddr)->sin_port;
        ok                  = write_all(&port, sizeof(port));
    }
    const auto deadline = std::chrono::steady_clock::now() + kTimeout;
    while (ok && (conn_request_ == nullptr)) {
        ucp_worker_progress(worker_);
        ok = std::chrono::steady_clock::now() < deadline;
    }
    if (ok) {
        eparams.field_mask   = UCP_EP_PARAM_FIELD_CONN_REQUEST;
        eparams.conn_request = conn_request_;
        ok                   = ucp_ep_create(worker_, &eparams, &ep_) == UCS_OK;
    }
    ucp_listener_destroy(listener);
    return ok;
}

bool Peer::connect_to(const Peer &other) {
    ucp_address_t *address = nullptr;
    size_t         length  = 0;
    if (ucp_worker_get_address(other.worker_, &address, &length) != UCS_OK) {
        return false;
    }
    const bool ok = create_ep(address);
    ucp_worker_release_address(other.worker_, address);
    return ok;
}

bool Peer::create_ep(const ucp_address_t *address) {
    ucp_ep_params_t eparams{};
    eparams.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    eparams.address    = address;
    return ucp_ep_create(worker_, &eparams, &ep_) == UCS_OK;
}

void Peer::close_ep() {
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags        = 0; /* flush */
    wait(ucp_ep_close_nbx(ep_, &param));
}

bool Peer::signal(uint8_t value) { return write_all(&value, 1); }

bool Peer::wait_signal(uint8_t expected) {
    const auto deadline = std::chrono::steady_clock::now() + kTimeout;
    for (;;) {
        ucp_worker_progress(worker_);
        pollfd pfd{fd_, POLLIN, 0};
        if (poll(&pfd, 1, 0) == 1) {
            uint8_t got = 0;
            return read_all(&got, 1) && got == expected;
        }
        if (std::chrono::steady_clock::now() > deadline) {
            return false;
        }
    }
}

ucs_status_t Peer::wait(void *req) {
    if (req == nullptr) {
        return UCS_OK;
    }
    if (UCS_PTR_IS_ERR(req)) {
        return UCS_PTR_STATUS(req);
    }
    const auto   deadline = std::chrono::steady_clock::now() + kTimeout;
    ucs_status_t status;
    while ((status = ucp_request_check_status(req)) == UCS_INPROGRESS) {
        ucp_worker_progress(worker_);
        if (std::chrono::steady_clock::now() > deadline) {
            return UCS_ERR_TIMED_OUT;
        }
    }
    ucp_request_free(req);
    return status;
}

void Peer::progress_for(std::chrono::milliseconds time) {
    const auto until = std::chrono::steady_clock::now() + time;
    while (std::chrono::steady_clock::now() < until) {
        ucp_worker_progress(worker_);
    }
}

PairResult run_pair(int (*receiver)(int fd), int (*sender)(int fd), std::string *receiver_stderr) {
    PairResult result{-1, 1, 1};
    int        sv[2], errpipe[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0 || pipe(errpipe) != 0) {
        perror("socketpair/pipe");
        return result;
    }
    fflush(nullptr);
    const pid_t rpid = fork();
    if (rpid == 0) {
        close(sv[1]);
        close(errpipe[0]);
        dup2(errpipe[1], STDERR_FILENO);
        _exit(receiver(sv[0]));
    }
    close(errpipe[1]);
    const pid_t spid = fork();
    if (spid == 0) {
        close(sv[0]);
        close(errpipe[0]);
        _exit(sender(sv[1]));
    }
    close(sv[0]);
    close(sv[1]);

    char    chunk[4096];
    ssize_t n;
    while ((n = read(errpipe[0], chunk, sizeof(chunk))) > 0) {
        receiver_stderr->append(chunk, static_cast<size_t>(n));
    }
    close(errpipe[0]);
    fputs(receiver_stderr->c_str(), stderr);

    int rstatus = 0, sstatus = 0;
    waitpid(rpid, &rstatus, 0);
    waitpid(spid, &sstatus, 0);
    result.receiver_pid = rpid;
    result.receiver_rc  = exit_code(rstatus);
    result.sender_rc    = exit_code(sstatus);
    return result;
}

TagListCounters parse_tag_list_counters(const std::string &text, int pid) {
    TagListCounters   counters;
    const std::string key = "(pid " + std::to_string(pid) + "):";
    for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + 1)) {
        const size_t  list = text.find("tag list:", at);
        unsigned long posted, matched, cancelled;
        if (list != std::string::npos &&
            sscanf(text.c_str() + list, "tag list: %lu posted, %lu matched, %lu cancelled",
                   &posted, &matched, &cancelled) == 3) {
            counters.found = true;
            counters.posted += posted;
            counters.matched += matched;
            counters.cancelled += cancelled;
        }
    }
    return counters;
}

}  // namespace ucp_test
