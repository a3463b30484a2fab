/* The message-size lists the benchmarks take (-s 8,1k,64k,1m): sizes in bytes
 * separated by commas, each a decimal whole number with an optional binary
 * suffix k/K (KiB), m/M (MiB) or g/G (GiB). Anything else is refused with the
 * reason -- an empty item, a sign, a fraction, an unknown suffix, a size
 * beyond size_t -- rather than read as some other size. */
#ifndef UCT_TM_TOOLS_SIZE_LIST_H_
#define UCT_TM_TOOLS_SIZE_LIST_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace uct_tm {

/* One size of a list; false with *error saying why. */
inline bool parse_size(const std::string &item, size_t *out, std::string *error) {
    size_t i = 0, value = 0;
    if (item.empty()) {
        *error = "empty";
        return false;
    }
    for (; (i < item.size()) && (item[i] >= '0') && (item[i] <= '9'); ++i) {
        const size_t digit = static_cast<size_t>(item[i] - '0');
        if (value > (SIZE_MAX - digit) / 10) {
            *error = "too large";
            return false;
        }
        value = value * 10 + digit;
    }
    if (i == 0) {
        *error = "not a whole number of bytes";
        return false;
    }
    unsigned shift = 0;
    if (i < item.size()) {
        const char s = item[i];
        shift = ((s == 'k') || (s == 'K'))   ? 10
                : ((s == 'm') || (s == 'M')) ? 20
                : ((s == 'g') || (s == 'G')) ? 30
                                             : 0;
        if ((shift == 0) || (i + 1 != item.size())) {
            *error = "unknown suffix '" + item.substr(i) + "' (k, m or g)";
            return false;
        }
    }
    if (value > (SIZE_MAX >> shift)) {
        *error = "too large";
        return false;
    }
    *out = value << shift;
    return true;
}

/* A whole list, in order (repeats kept); false with *error saying which
 * item is wrong and why. */
inline bool parse_size_list(const std::string &text, std::vector<size_t> *out,
                            std::string *error) {
    std::vector<size_t> sizes;
    size_t              pos = 0, n = 1;
    for (;; ++n) {
        const size_t comma = text.find(',', pos);
        const size_t end   = (comma == std::string::npos) ? text.size() : comma;
        const std::string item = text.substr(pos, end - pos);
        size_t            size;
        std::string       why;
        if (!parse_size(item, &size, &why)) {
            *error = "size list '" + text + "', item " + std::to_string(n) + " '" + item + "': " + why;
            return false;
        }
        sizes.push_back(size);
        if (comma == std::string::npos) {
            break;
        }
        pos = comma + 1;
    }
    *out = std::move(sizes);
    return true;
}

/* A tool's -s option: false, after telling stderr why, if `text` is no list. */
inline bool parse_sizes_option(const char *tool, const char *text, std::vector<size_t> *out) {
    std::string error;
    if (parse_size_list(text, out, &error)) {
        return true;
    }
    fprintf(stderr, "%s: -s: %s\n", tool, error.c_str());
    return false;
}

}  // namespace uct_tm

#endif
