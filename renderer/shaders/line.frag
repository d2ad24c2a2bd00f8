#version 450
// Coverage of a pixel by a round-capped segment: 1 inside, falling linearly to 0 over the
// pixel that straddles the edge (a box filter of the edge).
layout(location = 0) flat in vec4 ends;
layout(location = 1) flat in vec4 color;
layout(location = 2) flat in float halfWidth;

layout(location = 0) out vec4 outColor;

void main() {
    vec2 p = gl_FragCoord.xy;   // pixel centre, origin top-left, like View's screen coordinates
    vec2 a = ends.xy;
    vec2 ab = ends.zw - a;
    float t = clamp(dot(p - a, ab) / max(dot(ab, ab), 1e-8), 0.0, 1.0);
    float dist = length(p - (a + t * ab));
    float coverage = clamp(halfWidth + 0.5 - dist, 0.0, 1.0);
    if (coverage <= 0.0)
        discard;
    outColor = vec4(color.rgb, color.a * coverage);
}
