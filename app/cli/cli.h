#pragma once
// Headless subcommands of the `glimpse` executable. Each takes the arguments after its name
// (e.g. for `glimpse info a.h5`, args = {"a.h5"}), prints to stdout/stderr and returns the
// process exit code: 0 success, 1 failure (message on stderr), 2 bad usage.
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace glimpse::cli {

int info(const std::vector<std::string>& args);    // glimpse info FILE.h5
int infer(const std::vector<std::string>& args);   // glimpse infer --model letr ...
int bench(const std::vector<std::string>& args);   // glimpse bench letr ...
int env(const std::vector<std::string>& args);     // glimpse env list | score
int benchRl(const std::vector<std::string>& args); // glimpse bench rl [--threads T]
int data(const std::vector<std::string>& args);    // glimpse data export ...
int train(const std::vector<std::string>& args);   // glimpse train letr ...
int eval(const std::vector<std::string>& args);    // glimpse eval letr --checkpoint C --data D
int benchInspector(const std::vector<std::string>& args); // glimpse bench inspector
int trainEfficientZero(const std::vector<std::string>& args);  // glimpse train efficientzero ...
int play(const std::vector<std::string>& args);    // glimpse play --checkpoint C --env NAME
int inferCoat(const std::vector<std::string>& args); // glimpse infer --model coat ...
int benchCoat(const std::vector<std::string>& args); // glimpse bench coat [--variant V]
int trainCoat(const std::vector<std::string>& args); // glimpse train coat --data D --out RUN ...

// Minimal option parser shared by the subcommands: "--key value", "--flag", positionals.
class Args {
public:
    // `flags` are options that take no value (e.g. "--layers-all").
    Args(const std::vector<std::string>& args, const std::vector<std::string>& flags = {});
    bool has(const std::string& key) const;                       // key like "--out"
    std::optional<std::string> get(const std::string& key) const;
    std::string get(const std::string& key, const std::string& def) const;
    // Throws glimpse::Error("--key: expected a number, got 'x'") on bad numbers.
    double getDouble(const std::string& key, double def) const;
    long long getInt(const std::string& key, long long def) const;
    std::string require(const std::string& key) const;            // throws Error when absent
    const std::vector<std::string>& positional() const { return positional_; }
    // Keys given that are not in `known`: reported as an Error (catches typos).
    void checkKnown(const std::vector<std::string>& known) const;

private:
    std::map<std::string, std::string> values_;
    std::vector<std::string> positional_;
};

} // namespace glimpse::cli
