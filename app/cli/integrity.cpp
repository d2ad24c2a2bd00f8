// glimpse data verify FILE.h5 ...: reads every dataset so every checksum is verified, and says
// what in the file carries one. glimpse data resave IN.h5 [--out OUT.h5]: rewrites a checkpoint
// with the current writer (checksums on every tensor; docs/integrity.md), tensors bit-identical.
#include <iostream>

#include "app/cli/cli.h"
#include "core/error.h"
#include "core/io/integrity.h"
#include "core/util/isolate.h"

namespace glimpse::cli {

// Reading every byte of a large file takes a while; this long means libhdf5 is stuck.
constexpr double kVerifyTimeoutSeconds = 600;

int dataVerify(const std::vector<std::string>& args) {
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::cout << "usage: glimpse data verify FILE.h5 [FILE.h5 ...]\n"
                     "Reads every dataset of each file, so that HDF5 verifies every checksum in it;\n"
                     "exit 1 when a file is corrupt, 3 when it reads but parts carry no checksum.\n";
        return args.empty() ? 2 : 0;
    }
    Args(args).checkKnown({});   // options are refused, not read as file names
    int rc = 0;
    for (const auto& path : args) {
        // In a child process (core/util/isolate.h): a file that crashes or hangs libhdf5 is
        // reported as corrupt; the exit code carries the verdict (0 ok, 3 unchecked parts, 1 corrupt).
        const IsolatedResult iso = runIsolated(
            [&path] {
                try {
                    const VerifyReport r = verifyFile(path);
                    std::cout << path << ": ok, " << r.datasets << " datasets (" << r.checksummed << " with Fletcher-32, "
                              << r.inHeader << " inside checksummed object headers), " << r.bytes << " bytes read; "
                              << (r.superblockVersion >= 2 ? "metadata checksummed" : "metadata NOT checksummed")
                              << " (superblock v" << r.superblockVersion << ")\n";
                    for (size_t i = 0; i < r.unchecked.size() && i < 5; ++i)
                        std::cout << "  no checksum: " << r.unchecked[i] << "\n";
                    if (r.unchecked.size() > 5)
                        std::cout << "  ... and " << r.unchecked.size() - 5 << " more without a checksum\n";
                    if (!r.fullyChecked()) {
                        std::cout << "  (rewrite a checkpoint with checksums: glimpse data resave " << path << ")\n";
                        return 3;
                    }
                    return 0;
                } catch (const Error& e) {
                    std::cout << "CORRUPT " << e.what() << "\n";
                    return 1;
                }
            },
            kVerifyTimeoutSeconds);
        const std::string why = iso.failure("reading it");
        if (!why.empty()) std::cout << "CORRUPT " << path << ": " << why << "\n";
        const int code = why.empty() ? iso.exitCode : 1;
        if (code == 1) rc = 1;
        else if (code == 3 && rc == 0) rc = 3;
    }
    return rc;
}

int dataResave(const std::vector<std::string>& args) {
    const char* usage = "usage: glimpse data resave IN.h5 [--out OUT.h5]\n"
                        "Rewrites a checkpoint with checksums on every tensor (default: in place, atomically),\n"
                        "then reads it back and checks every tensor is bit-identical.\n";
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::cout << usage;
        return args.empty() ? 2 : 0;
    }
    Args a(args, {});
    a.checkKnown({"--out"});
    if (a.positional().size() != 1) {
        std::cerr << "glimpse data resave: expected one checkpoint\n" << usage;
        return 2;
    }
    const std::string in = a.positional()[0];
    const std::string out = a.get("--out", in);
    resaveCheckpoint(in, out);
    std::cout << out << ": rewritten with checksums; every tensor is bit-identical to " << in << "\n";
    return 0;
}

} // namespace glimpse::cli
