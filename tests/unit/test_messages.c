/* test_messages.c: Anthropic Messages callers <-> OpenAI chat upstreams (fcgi/messages.h).
 *
 * JSON in these tables is written with ' for " (q() swaps them back; \\' is an
 * escaped quote inside a string) and compared semantically with json_object_equal;
 * every output is also checked to be compact. */
#include "check.h"
#include "check_json.h"

#include "buf.h"
#include "messages.h"
#include "usage.h"

#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

/* ---- requests: Messages -> chat ------------------------------------------- */

#define IN "'model':'claude-sonnet-4-5','max_tokens':256,"
#define HI "'messages':[{'role':'user','content':'Hi'}]"
#define OUT_HI "'model':'qwen','messages':[{'role':'user','content':'Hi'}],'max_tokens':256"
#define U(c) "{'role':'user','content':" c "}"
#define A(c) "{'role':'assistant','content':" c "}"
#define TOOL_IN "{'name':'get_weather','description':'Weather now','input_schema':{'type':'object'," \
                "'properties':{'city':{'type':'string'}},'required':['city']}}"
#define TOOL_OUT "{'type':'function','function':{'name':'get_weather','description':'Weather now','parameters':" \
                 "{'type':'object','properties':{'city':{'type':'string'}},'required':['city']}}}"
#define CALL "{'type':'tool_use','id':'toolu_1','name':'get_weather','input':{'city':'Paris'}}"
#define CALL_OUT "{'id':'toolu_1','type':'function','function':{'name':'get_weather','arguments':" \
                 "'{\\'city\\':\\'Paris\\'}'}}"

static const struct req_case {
    const char *name;
    const char *msg;            /* q-notation Messages body */
    int stream;
    const char *want;           /* q-notation chat body, or NULL when refused */
    enum error_code code;
    const char *param;          /* NULL: param must be NULL */
} req_cases[] = {
    /* shape */
    {"minimal", "{" IN HI "}", 0, "{" OUT_HI "}", 0, NULL},
    {"escaping kept",
     "{" IN "'messages':[{'role':'user','content':'a \\'q\\' \\\\ \\n tab\\t \xc3\xa9 \\u2028 </x>'}]}", 0,
     "{'model':'qwen','messages':[{'role':'user','content':'a \\'q\\' \\\\ \\n tab\\t \xc3\xa9 \\u2028 </x>'}],"
     "'max_tokens':256}", 0, NULL},
    {"stream asks for usage", "{" IN HI ",'stream':true}", 1,
     "{" OUT_HI ",'stream':true,'stream_options':{'include_usage':true}}", 0, NULL},
    {"stream false, caller not streaming", "{" IN HI ",'stream':false}", 0, "{" OUT_HI "}", 0, NULL},
    {"stream wrong type", "{" IN HI ",'stream':'yes'}", 0, NULL, ERR_INVALID_TYPE, "stream"},
    {"body not an object", "[1]", 0, NULL, ERR_INVALID_TYPE, NULL},
    {"model wrong type", "{'model':5,'max_tokens':256," HI "}", 0, NULL, ERR_INVALID_TYPE, "model"},
    /* system */
    {"system string first", "{" IN "'system':'Be terse.'," HI "}", 0,
     "{'model':'qwen','messages':[{'role':'system','content':'Be terse.'},{'role':'user','content':'Hi'}],"
     "'max_tokens':256}", 0, NULL},
    {"system blocks joined with newline, cache_control dropped",
     "{" IN "'system':[{'type':'text','text':'You are Claude Code.'},{'type':'text','text':'Be terse.',"
     "'cache_control':{'type':'ephemeral'}}]," HI "}", 0,
     "{'model':'qwen','messages':[{'role':'system','content':'You are Claude Code.\\nBe terse.'},"
     "{'role':'user','content':'Hi'}],'max_tokens':256}", 0, NULL},
    {"empty system not sent", "{" IN "'system':''," HI "}", 0, "{" OUT_HI "}", 0, NULL},
    {"empty system array not sent", "{" IN "'system':[]," HI "}", 0, "{" OUT_HI "}", 0, NULL},
    {"system null is absent", "{" IN "'system':null," HI "}", 0, "{" OUT_HI "}", 0, NULL},
    {"system image block refused",
     "{" IN "'system':[{'type':'image','source':{'type':'url','url':'https://e.com/a.png'}}]," HI "}", 0, NULL,
     ERR_UNSUPPORTED_PARAMETER, "system[0].type"},
    {"system wrong type", "{" IN "'system':7," HI "}", 0, NULL, ERR_INVALID_TYPE, "system"},
    {"system text wrong type", "{" IN "'system':[{'type':'text','text':1}]," HI "}", 0, NULL, ERR_INVALID_TYPE,
     "system[0].text"},
    {"system block unknown key", "{" IN "'system':[{'type':'text','text':'S','lang':'en'}]," HI "}", 0, NULL,
     ERR_UNSUPPORTED_PARAMETER, "system[0].lang"},
    /* user content */
    {"user text blocks",
     "{" IN "'messages':[" U("[{'type':'text','text':'a'},{'type':'text','text':'b','cache_control':"
                             "{'type':'ephemeral'}}]") "]}", 0,
     "{'model':'qwen','messages':[" U("[{'type':'text','text':'a'},{'type':'text','text':'b'}]") "],"
     "'max_tokens':256}", 0, NULL},
    {"image base64 -> data URL",
     "{" IN "'messages':[" U("[{'type':'image','source':{'type':'base64','media_type':'image/png','data':"
                             "'iVBORw0KGgo='}},{'type':'text','text':'What?'}]") "]}", 0,
     "{'model':'qwen','messages':[" U("[{'type':'image_url','image_url':{'url':'data:image/png;base64,"
                                      "iVBORw0KGgo='}},{'type':'text','text':'What?'}]") "],'max_tokens':256}", 0,
     NULL},
    {"image url",
     "{" IN "'messages':[" U("[{'type':'image','source':{'type':'url','url':'https://e.com/a.jpg'},"
                             "'cache_control':{'type':'ephemeral'}}]") "]}", 0,
     "{'model':'qwen','messages':[" U("[{'type':'image_url','image_url':{'url':'https://e.com/a.jpg'}}]") "],"
     "'max_tokens':256}", 0, NULL},
    {"image file source refused",
     "{" IN "'messages':[" U("[{'type':'image','source':{'type':'file','file_id':'file_1'}}]") "]}", 0, NULL,
     ERR_UNSUPPORTED_PARAMETER, "messages[0].content[0].source.type"},
    {"image without data",
     "{" IN "'messages':[" U("[{'type':'image','source':{'type':'base64','media_type':'image/png'}}]") "]}", 0,
     NULL, ERR_MISSING_FIELD, "messages[0].content[0].source.data"},
    {"image source unknown key",
     "{" IN "'messages':[" U("[{'type':'image','source':{'type':'url','url':'https://e.com/a.jpg','w':1}}]") "]}",
     0, NULL, ERR_UNSUPPORTED_PARAMETER, "messages[0].content[0].source.w"},
    {"document block refused",
     "{" IN "'messages':[" U("[{'type':'document','source':{'type':'text','media_type':'text/plain','data':'x'}}]")
     "]}", 0, NULL, ERR_UNSUPPORTED_PARAMETER, "messages[0].content[0].type"},
    {"user content empty", "{" IN "'messages':[" U("[]") "]}", 0, NULL, ERR_INVALID_VALUE, "messages[0].content"},
    /* found by fuzz_messages_request: an empty prefill alone left "messages":[] */
    {"only an empty prefill", "{" IN "'messages':[{'role':'assistant','content':''}]}", 0, NULL, ERR_INVALID_VALUE,
     "messages"},
    {"user tool_use block", "{" IN "'messages':[" U("[" CALL "]") "]}", 0, NULL, ERR_INVALID_VALUE,
     "messages[0].content[0].type"},
    {"text wrong type, path named",
     "{" IN "'messages':[" U("'a'") "," A("'b'") "," U("[{'type':'text','text':'c'},{'type':'text','text':5}]") "]}",
     0, NULL, ERR_INVALID_TYPE, "messages[2].content[1].text"},
    {"block not an object", "{" IN "'messages':[" U("['a']") "]}", 0, NULL, ERR_INVALID_TYPE,
     "messages[0].content[0]"},
    {"block without type", "{" IN "'messages':[" U("[{'text':'a'}]") "]}", 0, NULL, ERR_MISSING_FIELD,
     "messages[0].content[0].type"},
    {"text block unknown key", "{" IN "'messages':[" U("[{'type':'text','text':'a','annotations':[]}]") "]}", 0,
     NULL, ERR_UNSUPPORTED_PARAMETER, "messages[0].content[0].annotations"},
    {"cache_control not an object",
     "{" IN "'messages':[" U("[{'type':'text','text':'a','cache_control':'ephemeral'}]") "]}", 0, NULL,
     ERR_INVALID_TYPE, "messages[0].content[0].cache_control"},
    {"citations null and [] pass",
     "{" IN "'messages':[" U("[{'type':'text','text':'a','citations':null}]") ","
     A("[{'type':'text','text':'b','citations':[]}]") "," U("'c'") "]}", 0,
     "{'model':'qwen','messages':[" U("[{'type':'text','text':'a'}]") "," A("'b'") "," U("'c'") "],"
     "'max_tokens':256}", 0, NULL},
    {"citations refused",
     "{" IN "'messages':[" U("[{'type':'text','text':'a','citations':[{'type':'char_location'}]}]") "]}", 0, NULL,
     ERR_UNSUPPORTED_PARAMETER, "messages[0].content[0].citations"},
    /* messages */
    {"role system refused", "{" IN "'messages':[{'role':'system','content':'S'}," U("'Hi'") "]}", 0, NULL,
     ERR_INVALID_VALUE, "messages[0].role"},
    {"role missing", "{" IN "'messages':[{'content':'Hi'}]}", 0, NULL, ERR_MISSING_FIELD, "messages[0].role"},
    {"role wrong type", "{" IN "'messages':[{'role':1,'content':'Hi'}]}", 0, NULL, ERR_INVALID_TYPE,
     "messages[0].role"},
    {"content missing", "{" IN "'messages':[{'role':'user'}]}", 0, NULL, ERR_MISSING_FIELD, "messages[0].content"},
    {"content wrong type", "{" IN "'messages':[{'role':'user','content':5}]}", 0, NULL, ERR_INVALID_TYPE,
     "messages[0].content"},
    {"message unknown key", "{" IN "'messages':[{'role':'user','content':'Hi','name':'bob'}]}", 0, NULL,
     ERR_UNSUPPORTED_PARAMETER, "messages[0].name"},
    {"message not an object", "{" IN "'messages':['Hi']}", 0, NULL, ERR_INVALID_TYPE, "messages[0]"},
    {"messages missing", "{'model':'m','max_tokens':5}", 0, NULL, ERR_MISSING_FIELD, "messages"},
    {"messages empty", "{" IN "'messages':[]}", 0, NULL, ERR_INVALID_VALUE, "messages"},
    {"messages not an array", "{" IN "'messages':'Hi'}", 0, NULL, ERR_INVALID_TYPE, "messages"},
    /* assistant turns, tool use and results */
    {"assistant text and tool_use, then results before the user's text",
     "{" IN "'messages':[" U("'Weather in Paris and Rome?'") ","
     A("[{'type':'text','text':'Checking.'}," CALL ",{'type':'tool_use','id':'toolu_2','name':'get_weather',"
       "'input':{'city':'Rome','days':[1,2]},'cache_control':{'type':'ephemeral'}}]") ","
     U("[{'type':'tool_result','tool_use_id':'toolu_1','content':'18C'},{'type':'text','text':'Also...'},"
       "{'type':'tool_result','tool_use_id':'toolu_2','content':[{'type':'text','text':'21C'},{'type':'text',"
       "'text':'sunny','cache_control':{'type':'ephemeral'}}],'cache_control':{'type':'ephemeral'}}]") "]}", 0,
     "{'model':'qwen','messages':[" U("'Weather in Paris and Rome?'") ","
     "{'role':'assistant','content':'Checking.','tool_calls':[" CALL_OUT ",{'id':'toolu_2','type':'function',"
     "'function':{'name':'get_weather','arguments':'{\\'city\\':\\'Rome\\',\\'days\\':[1,2]}'}}]},"
     "{'role':'tool','tool_call_id':'toolu_1','content':'18C'},{'role':'tool','tool_call_id':'toolu_2','content':"
     "'21C\\nsunny'}," U("[{'type':'text','text':'Also...'}]") "],'max_tokens':256}", 0, NULL},
    {"assistant only tool_use: content null, results only: tool messages only",
     "{" IN "'messages':[" U("'Go'") "," A("[" CALL "]") ","
     U("[{'type':'tool_result','tool_use_id':'toolu_1','content':'failed: no network','is_error':true}]") "]}", 0,
     "{'model':'qwen','messages':[" U("'Go'") ",{'role':'assistant','content':null,'tool_calls':[" CALL_OUT "]},"
     "{'role':'tool','tool_call_id':'toolu_1','content':'failed: no network'}],'max_tokens':256}", 0, NULL},
    {"tool_result without content is empty",
     "{" IN "'messages':[" U("'Go'") "," A("[" CALL "]") "," U("[{'type':'tool_result','tool_use_id':'toolu_1'}]")
     "]}", 0,
     "{'model':'qwen','messages':[" U("'Go'") ",{'role':'assistant','content':null,'tool_calls':[" CALL_OUT "]},"
     "{'role':'tool','tool_call_id':'toolu_1','content':''}],'max_tokens':256}", 0, NULL},
    {"thinking and redacted_thinking dropped, texts joined",
     "{" IN "'messages':[" U("'Hi'") ","
     A("[{'type':'thinking','thinking':'hmm','signature':'sig'},{'type':'redacted_thinking','data':'xx'},"
       "{'type':'text','text':'Hel'},{'type':'text','text':'lo'}]") "," U("'Again'") "]}", 0,
     "{'model':'qwen','messages':[" U("'Hi'") "," A("'Hello'") "," U("'Again'") "],'max_tokens':256}", 0, NULL},
    {"assistant with only thinking keeps its turn",
     "{" IN "'messages':[" U("'Hi'") "," A("[{'type':'thinking','thinking':'hmm','signature':'s'}]") ","
     U("'Again'") "]}", 0,
     "{'model':'qwen','messages':[" U("'Hi'") "," A("''") "," U("'Again'") "],'max_tokens':256}", 0, NULL},
    {"tool_result image content refused",
     "{" IN "'messages':[" U("'Go'") "," A("[" CALL "]") ","
     U("[{'type':'tool_result','tool_use_id':'toolu_1','content':[{'type':'image','source':{'type':'url',"
       "'url':'https://e.com/a.png'}}]}]") "]}", 0, NULL, ERR_UNSUPPORTED_PARAMETER,
     "messages[2].content[0].content[0].type"},
    {"tool_result without tool_use_id",
     "{" IN "'messages':[" U("'Go'") "," A("[" CALL "]") "," U("[{'type':'tool_result','content':'x'}]") "]}", 0,
     NULL, ERR_MISSING_FIELD, "messages[2].content[0].tool_use_id"},
    {"tool_result is_error wrong type",
     "{" IN "'messages':[" U("[{'type':'tool_result','tool_use_id':'t','content':'x','is_error':'yes'}]") "]}", 0,
     NULL, ERR_INVALID_TYPE, "messages[0].content[0].is_error"},
    {"tool_result content wrong type",
     "{" IN "'messages':[" U("[{'type':'tool_result','tool_use_id':'t','content':5}]") "]}", 0, NULL,
     ERR_INVALID_TYPE, "messages[0].content[0].content"},
    {"tool_use input not an object",
     "{" IN "'messages':[" U("'Go'") "," A("[{'type':'tool_use','id':'t','name':'f','input':'{}'}]") ","
     U("'x'") "]}", 0, NULL, ERR_INVALID_TYPE, "messages[1].content[0].input"},
    {"tool_use without id",
     "{" IN "'messages':[" U("'Go'") "," A("[{'type':'tool_use','name':'f','input':{}}]") "," U("'x'") "]}", 0,
     NULL, ERR_MISSING_FIELD, "messages[1].content[0].id"},
    {"tool_result in an assistant message",
     "{" IN "'messages':[" U("'Go'") "," A("[{'type':'tool_result','tool_use_id':'t','content':'x'}]") ","
     U("'x'") "]}", 0, NULL, ERR_INVALID_VALUE, "messages[1].content[0].type"},
    {"server_tool_use block refused",
     "{" IN "'messages':[" U("'Go'") "," A("[{'type':'server_tool_use','id':'s','name':'web_search','input':{}}]")
     "," U("'x'") "]}", 0, NULL, ERR_UNSUPPORTED_PARAMETER, "messages[1].content[0].type"},
    /* a final assistant message is a prefill */
    {"prefill continued",
     "{" IN "'messages':[" U("'JSON please'") "," A("'{'") "]}", 0,
     "{'model':'qwen','messages':[" U("'JSON please'") "," A("'{'") "],'max_tokens':256,"
     "'continue_final_message':true,'add_generation_prompt':false}", 0, NULL},
    {"prefill blocks continued",
     "{" IN "'messages':[" U("'Hi'") "," A("[{'type':'text','text':'Sure: '}]") "]}", 1,
     "{'model':'qwen','messages':[" U("'Hi'") "," A("'Sure: '") "],'max_tokens':256,"
     "'continue_final_message':true,'add_generation_prompt':false,'stream':true,'stream_options':"
     "{'include_usage':true}}", 0, NULL},
    {"empty prefill not sent", "{" IN "'messages':[" U("'Hi'") "," A("''") "]}", 0, "{" OUT_HI "}", 0, NULL},
    {"final assistant tool_use refused", "{" IN "'messages':[" U("'Hi'") "," A("[" CALL "]") "]}", 0, NULL,
     ERR_INVALID_VALUE, "messages[1]"},
    /* tools and tool_choice */
    {"tools in order",
     "{" IN HI ",'tools':[" TOOL_IN ",{'type':'custom','name':'noargs','input_schema':{'type':'object'},"
     "'cache_control':{'type':'ephemeral'}}]}", 0,
     "{" OUT_HI ",'tools':[" TOOL_OUT ",{'type':'function','function':{'name':'noargs','parameters':"
     "{'type':'object'}}}]}", 0, NULL},
    {"tool strict kept", "{" IN HI ",'tools':[{'name':'f','input_schema':{'type':'object'},'strict':true}]}", 0,
     "{" OUT_HI ",'tools':[{'type':'function','function':{'name':'f','parameters':{'type':'object'},'strict':true}}]}",
     0, NULL},
    {"server tool refused",
     "{" IN HI ",'tools':[" TOOL_IN ",{'type':'web_search_20250305','name':'web_search','max_uses':5}]}", 0, NULL,
     ERR_UNSUPPORTED_PARAMETER, "tools[1].type"},
    {"bash tool refused", "{" IN HI ",'tools':[{'type':'bash_20250124','name':'bash'}]}", 0, NULL,
     ERR_UNSUPPORTED_PARAMETER, "tools[0].type"},
    {"tool without input_schema", "{" IN HI ",'tools':[{'name':'f'}]}", 0, NULL, ERR_MISSING_FIELD,
     "tools[0].input_schema"},
    {"tool without name", "{" IN HI ",'tools':[{'input_schema':{}}]}", 0, NULL, ERR_MISSING_FIELD, "tools[0].name"},
    {"tool unknown key", "{" IN HI ",'tools':[{'name':'f','input_schema':{},'defer_loading':true}]}", 0, NULL,
     ERR_UNSUPPORTED_PARAMETER, "tools[0].defer_loading"},
    {"tool not an object", "{" IN HI ",'tools':['f']}", 0, NULL, ERR_INVALID_TYPE, "tools[0]"},
    {"tools empty not sent", "{" IN HI ",'tools':[]}", 0, "{" OUT_HI "}", 0, NULL},
    {"tool_choice auto", "{" IN HI ",'tools':[" TOOL_IN "],'tool_choice':{'type':'auto'}}", 0,
     "{" OUT_HI ",'tools':[" TOOL_OUT "],'tool_choice':'auto'}", 0, NULL},
    {"tool_choice any -> required", "{" IN HI ",'tools':[" TOOL_IN "],'tool_choice':{'type':'any'}}", 0,
     "{" OUT_HI ",'tools':[" TOOL_OUT "],'tool_choice':'required'}", 0, NULL},
    {"tool_choice none", "{" IN HI ",'tools':[" TOOL_IN "],'tool_choice':{'type':'none'}}", 0,
     "{" OUT_HI ",'tools':[" TOOL_OUT "],'tool_choice':'none'}", 0, NULL},
    {"tool_choice tool -> function",
     "{" IN HI ",'tools':[" TOOL_IN "],'tool_choice':{'type':'tool','name':'get_weather'}}", 0,
     "{" OUT_HI ",'tools':[" TOOL_OUT "],'tool_choice':{'type':'function','function':{'name':'get_weather'}}}", 0,
     NULL},
    {"disable_parallel_tool_use",
     "{" IN HI ",'tools':[" TOOL_IN "],'tool_choice':{'type':'any','disable_parallel_tool_use':true}}", 0,
     "{" OUT_HI ",'tools':[" TOOL_OUT "],'tool_choice':'required','parallel_tool_calls':false}", 0, NULL},
    {"disable_parallel_tool_use false changes nothing",
     "{" IN HI ",'tools':[" TOOL_IN "],'tool_choice':{'type':'auto','disable_parallel_tool_use':false}}", 0,
     "{" OUT_HI ",'tools':[" TOOL_OUT "],'tool_choice':'auto'}", 0, NULL},
    {"tool_choice auto without tools not sent", "{" IN HI ",'tool_choice':{'type':'auto'}}", 0, "{" OUT_HI "}", 0,
     NULL},
    {"tool_choice any without tools", "{" IN HI ",'tool_choice':{'type':'any'}}", 0, NULL, ERR_INVALID_VALUE,
     "tool_choice"},
    {"tool_choice unknown type", "{" IN HI ",'tools':[" TOOL_IN "],'tool_choice':{'type':'sometimes'}}", 0, NULL,
     ERR_INVALID_VALUE, "tool_choice.type"},
    {"tool_choice tool without name", "{" IN HI ",'tools':[" TOOL_IN "],'tool_choice':{'type':'tool'}}", 0, NULL,
     ERR_MISSING_FIELD, "tool_choice.name"},
    {"tool_choice a string", "{" IN HI ",'tools':[" TOOL_IN "],'tool_choice':'auto'}", 0, NULL, ERR_INVALID_TYPE,
     "tool_choice"},
    {"tool_choice unknown key", "{" IN HI ",'tools':[" TOOL_IN "],'tool_choice':{'type':'auto','x':1}}", 0, NULL,
     ERR_UNSUPPORTED_PARAMETER, "tool_choice.x"},
    /* max_tokens */
    {"max_tokens missing", "{'model':'m'," HI "}", 0, NULL, ERR_MISSING_FIELD, "max_tokens"},
    {"max_tokens null", "{'max_tokens':null," HI "}", 0, NULL, ERR_MISSING_FIELD, "max_tokens"},
    {"max_tokens 0", "{'max_tokens':0," HI "}", 0, NULL, ERR_INVALID_VALUE, "max_tokens"},
    {"max_tokens string", "{'max_tokens':'5'," HI "}", 0, NULL, ERR_INVALID_TYPE, "max_tokens"},
    {"max_tokens 1.5", "{'max_tokens':1.5," HI "}", 0, NULL, ERR_INVALID_TYPE, "max_tokens"},
    /* sampling, stop, metadata */
    {"stop_sequences -> stop", "{" IN HI ",'stop_sequences':['END','\\n\\nHuman:']}", 0,
     "{" OUT_HI ",'stop':['END','\\n\\nHuman:']}", 0, NULL},
    {"stop_sequences empty not sent", "{" IN HI ",'stop_sequences':[]}", 0, "{" OUT_HI "}", 0, NULL},
    {"stop_sequences wrong type", "{" IN HI ",'stop_sequences':['a',1]}", 0, NULL, ERR_INVALID_TYPE,
     "stop_sequences[1]"},
    {"stop_sequences a string", "{" IN HI ",'stop_sequences':'END'}", 0, NULL, ERR_INVALID_TYPE, "stop_sequences"},
    {"temperature, top_p, top_k", "{" IN HI ",'temperature':0.2,'top_p':0.95,'top_k':40}", 0,
     "{" OUT_HI ",'temperature':0.2,'top_p':0.95,'top_k':40}", 0, NULL},
    {"temperature 1 and 0 kept as written", "{" IN HI ",'temperature':1,'top_p':0}", 0,
     "{" OUT_HI ",'temperature':1,'top_p':0}", 0, NULL},
    {"temperature 1.5", "{" IN HI ",'temperature':1.5}", 0, NULL, ERR_INVALID_VALUE, "temperature"},
    {"temperature string", "{" IN HI ",'temperature':'hot'}", 0, NULL, ERR_INVALID_TYPE, "temperature"},
    {"top_p negative", "{" IN HI ",'top_p':-0.1}", 0, NULL, ERR_INVALID_VALUE, "top_p"},
    {"top_k negative", "{" IN HI ",'top_k':-1}", 0, NULL, ERR_INVALID_VALUE, "top_k"},
    {"top_k not an integer", "{" IN HI ",'top_k':0.5}", 0, NULL, ERR_INVALID_TYPE, "top_k"},
    {"metadata.user_id -> user", "{" IN HI ",'metadata':{'user_id':'user_abc_session_1'}}", 0,
     "{" OUT_HI ",'user':'user_abc_session_1'}", 0, NULL},
    {"metadata empty, user_id null", "{" IN HI ",'metadata':{'user_id':null}}", 0, "{" OUT_HI "}", 0, NULL},
    {"metadata other key", "{" IN HI ",'metadata':{'user_id':'u','team':'x'}}", 0, NULL, ERR_UNSUPPORTED_PARAMETER,
     "metadata.team"},
    {"metadata user_id wrong type", "{" IN HI ",'metadata':{'user_id':5}}", 0, NULL, ERR_INVALID_TYPE,
     "metadata.user_id"},
    {"metadata not an object", "{" IN HI ",'metadata':'x'}", 0, NULL, ERR_INVALID_TYPE, "metadata"},
    /* thinking, service_tier, unknown fields */
    {"thinking disabled passes", "{" IN HI ",'thinking':{'type':'disabled'}}", 0, "{" OUT_HI "}", 0, NULL},
    {"thinking enabled refused", "{" IN HI ",'thinking':{'type':'enabled','budget_tokens':1024}}", 0, NULL,
     ERR_UNSUPPORTED_PARAMETER, "thinking"},
    {"thinking adaptive refused", "{" IN HI ",'thinking':{'type':'adaptive'}}", 0, NULL, ERR_UNSUPPORTED_PARAMETER,
     "thinking"},
    {"thinking not an object", "{" IN HI ",'thinking':true}", 0, NULL, ERR_INVALID_TYPE, "thinking"},
    {"service_tier auto, standard_only pass", "{" IN HI ",'service_tier':'standard_only'}", 0, "{" OUT_HI "}", 0,
     NULL},
    {"service_tier auto passes", "{" IN HI ",'service_tier':'auto'}", 0, "{" OUT_HI "}", 0, NULL},
    {"service_tier priority refused", "{" IN HI ",'service_tier':'priority'}", 0, NULL, ERR_UNSUPPORTED_PARAMETER,
     "service_tier"},
    {"unknown field container", "{" IN HI ",'container':'c_1'}", 0, NULL, ERR_UNSUPPORTED_PARAMETER, "container"},
    {"unknown field even when null", "{" IN HI ",'mcp_servers':null}", 0, NULL, ERR_UNSUPPORTED_PARAMETER,
     "mcp_servers"},
    {"OpenAI field refused", "{" IN HI ",'n':1}", 0, NULL, ERR_UNSUPPORTED_PARAMETER, "n"},
    {"nulls are absent",
     "{" IN HI ",'temperature':null,'top_p':null,'top_k':null,'stop_sequences':null,'metadata':null,'tools':null,"
     "'tool_choice':null,'thinking':null,'service_tier':null,'stream':null}", 0, "{" OUT_HI "}", 0, NULL},
};

static void test_requests(void)
{
    for (size_t i = 0; i < sizeof req_cases / sizeof req_cases[0]; i++) {
        const struct req_case *c = &req_cases[i];
        char *msg_s = q(c->msg);
        struct json_object *msg = parse_n(msg_s, strlen(msg_s));
        CHECK(msg != NULL, "%s: the test's body does not parse: %s", c->name, msg_s);
        struct buf out;
        buf_init(&out, 0);
        buf_puts(&out, "PRE");
        struct xlate_fail f;
        memset(&f, 0x5a, sizeof f);
        int rc = messages_request(msg, "qwen", c->stream, &out, &f);
        json_object_put(msg);   /* f.param must not point into it */
        if (c->want) {
            CHECK(rc == 0, "%s: refused: %s (param %s)", c->name, f.message, f.param ? f.param : "null");
            if (rc == 0) {
                CHECK(memcmp(out.data, "PRE", 3) == 0, "%s: the output must be appended", c->name);
                check_json(c->name, out.data + 3, out.len - 3, c->want);
            }
        } else {
            CHECK(rc == -1, "%s: accepted: %s", c->name, out.data);
            CHECK(f.code == c->code, "%s: code %d, want %d (%s)", c->name, (int)f.code, (int)c->code, f.message);
            if (c->param)
                CHECK_STR(f.param, c->param, c->name);
            else
                CHECK(f.param == NULL, "%s: param %s, want null", c->name, f.param);
            CHECK(f.message[0] != '\0', "%s: no message", c->name);
            CHECK(out.len == 3 && strcmp(out.data, "PRE") == 0, "%s: output left behind: %s", c->name, out.data);
        }
        buf_free(&out);
        free(msg_s);
    }
}

/* The model argument NULL keeps the body's; a long unknown key is cut to param_buf. */
static void test_request_arguments(void)
{
    struct json_object *msg = json_tokener_parse(
        "{\"model\":\"claude-opus\",\"max_tokens\":9,\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}");
    struct xlate_fail f;
    struct buf out;
    buf_init(&out, 0);
    CHECK_INT(messages_request(msg, NULL, 0, &out, &f), 0, "model NULL");
    check_json("model from the body", out.data, out.len,
               "{'model':'claude-opus','messages':[{'role':'user','content':'Hi'}],'max_tokens':9}");
    buf_free(&out);
    json_object_put(msg);

    char key[300], body[400];
    memset(key, 'k', sizeof key - 1);
    key[sizeof key - 1] = '\0';
    snprintf(body, sizeof body, "{\"max_tokens\":9,\"%s\":1}", key);
    msg = json_tokener_parse(body);
    buf_init(&out, 0);
    CHECK_INT(messages_request(msg, "m", 0, &out, &f), -1, "long key");
    CHECK(f.code == ERR_UNSUPPORTED_PARAMETER && f.param == f.param_buf && strlen(f.param) == sizeof f.param_buf - 1,
          "long key: code %d param %.20s...", (int)f.code, f.param ? f.param : "(null)");
    CHECK_INT(out.len, 0, "long key leaves nothing");
    buf_free(&out);
    json_object_put(msg);
}

/* A capped output buffer: every cap short of the whole body is
 * request_too_large with the buffer as it was; the exact cap fits. */
static const char *const capped_bodies[] = {
    "{" IN "'system':[{'type':'text','text':'Be terse \\\\ \\'ok\\''},{'type':'text','text':'x'}],'messages':["
    U("[{'type':'text','text':'Hi \\n \xc3\xa9'},{'type':'image','source':{'type':'base64','media_type':'image/png',"
      "'data':'iVBORw0KGgo='}}]") "," A("[{'type':'text','text':'Checking.'}," CALL "]") ","
    U("[{'type':'tool_result','tool_use_id':'toolu_1','content':[{'type':'text','text':'18C'}]},"
      "{'type':'text','text':'thanks'}]") "," A("'{'") "],"
    "'temperature':0.5,'stop_sequences':['END'],'metadata':{'user_id':'u'},'tools':[" TOOL_IN "],"
    "'tool_choice':{'type':'any','disable_parallel_tool_use':true}}",
    "{" IN "'messages':[" U("'\\u00e9\\u2028 \\\\ \\u0001'") "]}",
};

static void test_request_capped(void)
{
    for (size_t i = 0; i < sizeof capped_bodies / sizeof capped_bodies[0]; i++) {
        char *msg_s = q(capped_bodies[i]);
        struct json_object *msg = parse_n(msg_s, strlen(msg_s));
        CHECK(msg != NULL, "capped body %zu does not parse", i);
        struct xlate_fail f;
        struct buf full;
        buf_init(&full, 0);
        buf_puts(&full, "PRE");
        CHECK_INT(messages_request(msg, "qwen", 1, &full, &f), 0, "capped body translates uncapped");
        for (size_t cap = 3; cap <= full.len; cap++) {
            struct buf out;
            buf_init(&out, cap);
            buf_puts(&out, "PRE");
            memset(&f, 0x5a, sizeof f);
            int rc = messages_request(msg, "qwen", 1, &out, &f);
            if (cap == full.len) {
                CHECK(rc == 0 && out.len == full.len && memcmp(out.data, full.data, full.len) == 0,
                      "body %zu: the exact cap %zu changed the body", i, cap);
            } else {
                CHECK(rc == -1 && f.code == ERR_REQUEST_TOO_LARGE && f.param == NULL && f.message[0],
                      "body %zu cap %zu: rc %d code %d", i, cap, rc, (int)f.code);
                CHECK(out.len == 3 && memcmp(out.data, "PRE", 4) == 0, "body %zu cap %zu: output left behind", i,
                      cap);
            }
            buf_free(&out);
        }
        buf_free(&full);
        json_object_put(msg);
        free(msg_s);
    }
}

/* ---- stop reasons ---------------------------------------------------------- */

static const struct {
    const char *finish, *stop_reason;
} stop_cases[] = {
    {"stop", "end_turn"},           {"length", "max_tokens"}, {"tool_calls", "tool_use"},
    {"function_call", "tool_use"},  {"content_filter", "refusal"}, {"something_new", "end_turn"},
    {"", "end_turn"},               {NULL, "end_turn"},
};

static void test_stop_reasons(void)
{
    for (size_t i = 0; i < sizeof stop_cases / sizeof stop_cases[0]; i++)
        CHECK_STR(messages_stop_reason(stop_cases[i].finish), stop_cases[i].stop_reason,
                  stop_cases[i].finish ? stop_cases[i].finish : "(null)");
}

/* ---- responses: chat.completion -> Message --------------------------------- */

#define CC(msg, finish, extra) "{'id':'chatcmpl-abc','object':'chat.completion','created':1,'model':'qwen'," \
                               "'choices':[{'index':0,'message':" msg ",'logprobs':null,'finish_reason':" finish \
                               extra "}]"
#define CC_USAGE(p, c, t) ",'usage':{'prompt_tokens':" #p ",'completion_tokens':" #c ",'total_tokens':" #t "}}"
#define MSG(content, stop, in, out, cached) "{'id':'msg_abc','type':'message','role':'assistant','model':'claude-x'," \
                                            "'content':" content ",'stop_reason':" stop                               \
                                            ",'stop_sequence':null,'usage':{'input_tokens':" #in                      \
                                            ",'output_tokens':" #out ",'cache_creation_input_tokens':0,"              \
                                            "'cache_read_input_tokens':" #cached "}}"

static const struct {
    const char *name;
    const char *body;           /* q-notation */
    int rc;
    const char *want;
    const char *stop_reason;
    int64_t prompt, completion, cached, reasoning;
    int found;
} resp_cases[] = {
    {"text, cached and reasoning counts",
     CC("{'role':'assistant','content':'Hello'}", "'stop'", "")
     ",'usage':{'prompt_tokens':100,'completion_tokens':20,'total_tokens':120,'prompt_tokens_details':"
     "{'cached_tokens':64},'completion_tokens_details':{'reasoning_tokens':5}}}", 0,
     MSG("[{'type':'text','text':'Hello'}]", "'end_turn'", 36, 20, 64), "end_turn", 100, 20, 64, 5, 1},
    {"text and tool calls",
     CC("{'role':'assistant','content':'Checking.','tool_calls':[{'id':'call_1','type':'function','function':"
        "{'name':'get_weather','arguments':'{\\'city\\': \\'Paris\\', \\'days\\': [1, 2]}'}},{'id':'call_2',"
        "'type':'function','function':{'name':'get_time','arguments':'{}'}}]}", "'tool_calls'", "")
     CC_USAGE(50, 30, 80), 0,
     MSG("[{'type':'text','text':'Checking.'},{'type':'tool_use','id':'call_1','name':'get_weather','input':"
         "{'city':'Paris','days':[1,2]}},{'type':'tool_use','id':'call_2','name':'get_time','input':{}}]",
         "'tool_use'", 50, 30, 0), "tool_use", 50, 30, 0, 0, 1},
    {"tool call only, content null, bad arguments -> {}",
     CC("{'role':'assistant','content':null,'tool_calls':[{'id':'c','type':'function','function':{'name':'f',"
        "'arguments':'{oops'}},{'type':'function','function':{'name':'g','arguments':'[1]'}}]}", "'tool_calls'", "")
     CC_USAGE(1, 2, 3), 0,
     MSG("[{'type':'tool_use','id':'c','name':'f','input':{}},{'type':'tool_use','id':'call_1','name':'g',"
         "'input':{}}]", "'tool_use'", 1, 2, 0), "tool_use", 1, 2, 0, 0, 1},
    {"arguments already an object",
     CC("{'role':'assistant','tool_calls':[{'id':'c','function':{'name':'f','arguments':{'a':'b/c'}}}]}",
        "'tool_calls'", "") CC_USAGE(1, 2, 3), 0,
     MSG("[{'type':'tool_use','id':'c','name':'f','input':{'a':'b/c'}}]", "'tool_use'", 1, 2, 0), "tool_use", 1,
     2, 0, 0, 1},
    {"legacy function_call",
     CC("{'role':'assistant','content':null,'function_call':{'name':'f','arguments':'{\\'x\\':1}'}}",
        "'function_call'", "") CC_USAGE(1, 2, 3), 0,
     MSG("[{'type':'tool_use','id':'call_0','name':'f','input':{'x':1}}]", "'tool_use'", 1, 2, 0), "tool_use", 1,
     2, 0, 0, 1},
    {"reasoning_content first as thinking",
     CC("{'role':'assistant','content':'42','reasoning_content':'Let me think.'}", "'stop'", "")
     CC_USAGE(10, 9, 19), 0,
     MSG("[{'type':'thinking','thinking':'Let me think.','signature':''},{'type':'text','text':'42'}]",
         "'end_turn'", 10, 9, 0), "end_turn", 10, 9, 0, 0, 1},
    {"reasoning (newer name), empty reasoning_content",
     CC("{'role':'assistant','content':'42','reasoning_content':'','reasoning':'Hm.'}", "'length'", "")
     CC_USAGE(10, 9, 19), 0,
     MSG("[{'type':'thinking','thinking':'Hm.','signature':''},{'type':'text','text':'42'}]", "'max_tokens'", 10, 9,
         0), "max_tokens", 10, 9, 0, 0, 1},
    {"content_filter -> refusal, empty content -> no block",
     CC("{'role':'assistant','content':''}", "'content_filter'", "") CC_USAGE(7, 0, 7), 0,
     MSG("[]", "'refusal'", 7, 0, 0), "refusal", 7, 0, 0, 0, 1},
    {"OpenAI refusal text",
     CC("{'role':'assistant','content':null,'refusal':'I cannot help with that.'}", "'stop'", "")
     CC_USAGE(7, 6, 13), 0,
     MSG("[{'type':'text','text':'I cannot help with that.'}]", "'refusal'", 7, 6, 0), "refusal", 7, 6, 0, 0, 1},
    {"vLLM stop_reason string -> stop_sequence",
     CC("{'role':'assistant','content':'a b'}", "'stop'", ",'stop_reason':'END'") CC_USAGE(3, 2, 5), 0,
     "{'id':'msg_abc','type':'message','role':'assistant','model':'claude-x','content':[{'type':'text','text':"
     "'a b'}],'stop_reason':'stop_sequence','stop_sequence':'END','usage':{'input_tokens':3,'output_tokens':2,"
     "'cache_creation_input_tokens':0,'cache_read_input_tokens':0}}", "stop_sequence", 3, 2, 0, 0, 1},
    {"vLLM stop token id: end_turn",
     CC("{'role':'assistant','content':'a'}", "'stop'", ",'stop_reason':151645") CC_USAGE(3, 2, 5), 0,
     MSG("[{'type':'text','text':'a'}]", "'end_turn'", 3, 2, 0), "end_turn", 3, 2, 0, 0, 1},
    {"no usage, null finish, id without prefix",
     "{'id':'xyz','object':'chat.completion','model':'qwen','choices':[{'index':0,'message':{'role':'assistant',"
     "'content':'x \\'q\\' \\n'},'finish_reason':null}]}", 0,
     "{'id':'msg_xyz','type':'message','role':'assistant','model':'claude-x','content':[{'type':'text','text':"
     "'x \\'q\\' \\n'}],'stop_reason':'end_turn','stop_sequence':null,'usage':{'input_tokens':0,'output_tokens':0,"
     "'cache_creation_input_tokens':0,'cache_read_input_tokens':0}}", "end_turn", 0, 0, 0, 0, 0},
    {"cached above prompt is clamped",
     CC("{'role':'assistant','content':'x'}", "'stop'", "")
     ",'usage':{'prompt_tokens':10,'completion_tokens':1,'prompt_tokens_details':{'cached_tokens':99}}}", 0,
     MSG("[{'type':'text','text':'x'}]", "'end_turn'", 0, 1, 10), "end_turn", 10, 1, 10, 0, 1},
    {"an error body is not a chat.completion", "{'error':{'message':'x','type':'server_error'}}", -1, NULL, "", 0,
     0, 0, 0, 0},
    {"a chunk is not a chat.completion",
     "{'id':'c','object':'chat.completion.chunk','choices':[{'index':0,'message':{'content':'x'}}]}", -1, NULL, "",
     0, 0, 0, 0, 0},
    {"no choices", "{'id':'c','object':'chat.completion','choices':[]}", -1, NULL, "", 0, 0, 0, 0, 0},
    {"not JSON", "<html>", -1, NULL, "", 0, 0, 0, 0, 0},
    {"truncated", CC("{'role':'assistant','content':'x'}", "'stop'", ""), -1, NULL, "", 0, 0, 0, 0, 0},
};

static void test_responses(void)
{
    for (size_t i = 0; i < sizeof resp_cases / sizeof resp_cases[0]; i++) {
        char *body = q(resp_cases[i].body);
        struct buf out;
        buf_init(&out, 0);
        struct usage u;
        memset(&u, 0x5a, sizeof u);
        char stop[32] = "junk";
        int rc = messages_response(body, strlen(body), "claude-x", &out, &u, stop, sizeof stop);
        CHECK(rc == resp_cases[i].rc, "%s: rc %d", resp_cases[i].name, rc);
        if (rc == 0 && resp_cases[i].want)
            check_json(resp_cases[i].name, out.data, out.len, resp_cases[i].want);
        if (rc != 0)
            CHECK_INT(out.len, 0, resp_cases[i].name);
        const char *got_stop = stop;
        CHECK_STR(got_stop, resp_cases[i].stop_reason, resp_cases[i].name);
        CHECK_INT(u.found, resp_cases[i].found, resp_cases[i].name);
        CHECK_INT(u.prompt_tokens, resp_cases[i].prompt, resp_cases[i].name);
        CHECK_INT(u.completion_tokens, resp_cases[i].completion, resp_cases[i].name);
        CHECK_INT(u.cache_read_tokens, resp_cases[i].cached, resp_cases[i].name);
        CHECK_INT(u.cache_creation_tokens, 0, resp_cases[i].name);
        CHECK_INT(u.reasoning_tokens, resp_cases[i].reasoning, resp_cases[i].name);
        buf_free(&out);
        free(body);
    }
    /* found by fuzz_messages_response: arguments that are not UTF-8 never reach the Message */
    {
        static const char bad[] = "{\"object\":\"chat.completion\",\"choices\":[{\"message\":{\"tool_calls\":[{"
                                  "\"id\":\"c\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":\\\"\xff\xfe\\\"}\"}}]}}]}";
        struct buf o;
        buf_init(&o, 0);
        CHECK_INT(messages_response(bad, sizeof bad - 1, "m", &o, NULL, NULL, 0), 0, "bad UTF-8 arguments");
        CHECK(o.data && strstr(o.data, "\"input\":{}") && !memchr(o.data, 0xff, o.len), "input: %.*s", (int)o.len,
              o.data ? o.data : "");
        buf_free(&o);
    }
    /* model NULL reports the body's */
    static const char body[] = "{\"id\":\"chatcmpl-1\",\"model\":\"qwen-7b\",\"choices\":[{\"message\":"
                               "{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}";
    struct buf out;
    buf_init(&out, 0);
    CHECK_INT(messages_response(body, sizeof body - 1, NULL, &out, NULL, NULL, 0), 0, "model NULL");
    check_json("model from the body", out.data, out.len,
               "{'id':'msg_1','type':'message','role':'assistant','model':'qwen-7b','content':[{'type':'text','text':"
               "'x'}],'stop_reason':'end_turn','stop_sequence':null,'usage':{'input_tokens':0,'output_tokens':0,"
               "'cache_creation_input_tokens':0,'cache_read_input_tokens':0}}");
    buf_free(&out);
}

/* A capped output buffer: every cap short of the whole answer is -1 with the
 * buffer as it was, usage zeroed and no stop reason; the exact cap fits. */
static void test_response_capped(void)
{
    char *body = q(CC("{'role':'assistant','content':'Checking \\'x\\'','reasoning_content':'hm','tool_calls':["
                      "{'id':'call_1','type':'function','function':{'name':'f','arguments':'{\\'a\\':[1]}'}}]}",
                      "'tool_calls'", "") CC_USAGE(5, 6, 11));
    struct buf full;
    struct usage u;
    char stop[32];
    buf_init(&full, 0);
    buf_puts(&full, "PRE");
    CHECK_INT(messages_response(body, strlen(body), "claude-x", &full, &u, stop, sizeof stop), 0,
              "capped response translates uncapped");
    for (size_t cap = 3; cap <= full.len; cap++) {
        struct buf out;
        buf_init(&out, cap);
        buf_puts(&out, "PRE");
        memset(&u, 0x5a, sizeof u);
        strcpy(stop, "junk");
        int rc = messages_response(body, strlen(body), "claude-x", &out, &u, stop, sizeof stop);
        if (cap == full.len) {
            CHECK(rc == 0 && out.len == full.len && memcmp(out.data, full.data, full.len) == 0 && u.found &&
                      strcmp(stop, "tool_use") == 0,
                  "the exact cap %zu changed the answer", cap);
        } else {
            CHECK(rc == -1, "cap %zu: rc %d", cap, rc);
            CHECK(out.len == 3 && memcmp(out.data, "PRE", 4) == 0, "cap %zu: output left behind", cap);
            CHECK(u.found == 0 && u.prompt_tokens == 0 && u.completion_tokens == 0, "cap %zu: usage kept", cap);
            CHECK(stop[0] == '\0', "cap %zu: stop reason %s kept", cap, stop);
        }
        buf_free(&out);
    }
    buf_free(&full);
    free(body);
}

/* ---- errors ---------------------------------------------------------------- */

#define AERR(type, msg) "{'type':'error','error':{'type':'" type "','message':'" msg "'}}"

static const struct {
    const char *name;
    long status;
    const char *body;           /* q-notation, sent as is */
    int want_status;
    const char *want;
} error_cases[] = {
    {"400 OpenAI shape", 400,
     "{'error':{'message':'max_tokens is too large','type':'invalid_request_error','param':'max_tokens',"
     "'code':null}}", 400, AERR("invalid_request_error", "max_tokens is too large")},
    {"401", 401, "{'error':{'message':'Incorrect API key','type':'invalid_request_error','code':'invalid_api_key'}}",
     401, AERR("authentication_error", "Incorrect API key")},
    {"403", 403, "{'error':{'message':'no','type':'permission_error'}}", 403, AERR("permission_error", "no")},
    {"404", 404, "{'error':{'message':'The model qwen does not exist.','type':'NotFoundError','code':404}}", 404,
     AERR("not_found_error", "The model qwen does not exist.")},
    {"413", 413, "{'error':{'message':'too big'}}", 413, AERR("request_too_large", "too big")},
    {"429", 429, "{'error':{'message':'Rate limit reached','type':'requests','code':'rate_limit_exceeded'}}", 429,
     AERR("rate_limit_error", "Rate limit reached")},
    {"500", 500, "{'error':{'message':'boom','type':'server_error'}}", 500, AERR("api_error", "boom")},
    {"503", 503, "{'error':{'message':'busy'}}", 503, AERR("overloaded_error", "busy")},
    {"529", 529, "{'error':{'message':'Overloaded'}}", 529, AERR("overloaded_error", "Overloaded")},
    {"vLLM older top-level message", 400,
     "{'object':'error','message':'This model\\'s maximum context length is 4096 tokens.','type':'BadRequestError',"
     "'param':null,'code':400}", 400,
     AERR("invalid_request_error", "This model\\'s maximum context length is 4096 tokens.")},
    {"FastAPI detail", 422, "{'detail':'Unprocessable'}", 422, AERR("invalid_request_error", "Unprocessable")},
    {"error a string", 500, "{'error':'upstream exploded'}", 500, AERR("api_error", "upstream exploded")},
    {"escaped message", 400, "{'error':{'message':'a \\'b\\'\\n\\u0001'}}", 400,
     AERR("invalid_request_error", "a \\'b\\'\\n\\u0001")},
    {"non-JSON 502", 502, "<html>Bad Gateway</html>", 502, AERR("api_error", "upstream answered 502")},
    {"empty 401", 401, "", 401, AERR("authentication_error", "upstream answered 401")},
    {"JSON without a message", 400, "{'error':{'type':'x'}}", 400,
     AERR("invalid_request_error", "upstream answered 400")},
    {"status outside 4xx/5xx", 200, "{'error':{'message':'odd'}}", 502, AERR("api_error", "odd")},
};

static void test_errors(void)
{
    for (size_t i = 0; i < sizeof error_cases / sizeof error_cases[0]; i++) {
        char *body = q(error_cases[i].body);
        struct buf out;
        buf_init(&out, 0);
        buf_puts(&out, "PRE");
        int st = messages_error(error_cases[i].status, body, strlen(body), &out);
        CHECK_INT(st, error_cases[i].want_status, error_cases[i].name);
        CHECK(memcmp(out.data, "PRE", 3) == 0, "%s: appended", error_cases[i].name);
        check_json(error_cases[i].name, out.data + 3, out.len - 3, error_cases[i].want);
        buf_free(&out);
        free(body);
    }
    struct buf out;
    buf_init(&out, 10);
    CHECK_INT(messages_error(500, "{}", 2, &out), 500, "capped error");
    CHECK_INT(out.len, 0, "capped error leaves nothing");
    buf_free(&out);
}

/* ---- streams --------------------------------------------------------------- */

#define MAX_IN 16
#define MAX_OUT 32

struct ev {
    const char *event;
    const char *data;           /* q-notation */
};

#define CHK(delta, fin) "{'id':'chatcmpl-abc','object':'chat.completion.chunk','created':1,'model':'qwen'," \
                        "'choices':[{'index':0,'delta':" delta ",'logprobs':null,'finish_reason':" fin "}]}"
#define ROLE CHK("{'role':'assistant','content':''}", "null")
#define CONTENT(t) CHK("{'content':'" t "'}", "null")
#define REASON(t) CHK("{'reasoning_content':'" t "'}", "null")
#define TOOL(k, id, name, a) CHK("{'tool_calls':[{'index':" #k ",'id':'" id "','type':'function','function':" \
                                 "{'name':'" name "','arguments':'" a "'}}]}", "null")
#define ARGS(k, a) CHK("{'tool_calls':[{'index':" #k ",'function':{'arguments':'" a "'}}]}", "null")
#define FIN(f) CHK("{}", "'" f "'")
#define USAGE(p, c, cached) "{'id':'chatcmpl-abc','object':'chat.completion.chunk','created':1,'model':'qwen'," \
                            "'choices':[],'usage':{'prompt_tokens':" #p ",'completion_tokens':" #c             \
                            ",'total_tokens':0,'prompt_tokens_details':{'cached_tokens':" #cached "}}}"

#define E_START {"message_start", "{'type':'message_start','message':{'id':'msg_abc','type':'message','role':" \
                                  "'assistant','model':'claude-x','content':[],'stop_reason':null,"             \
                                  "'stop_sequence':null,'usage':{'input_tokens':0,'output_tokens':0}}}"}
#define E_PING {"ping", "{'type':'ping'}"}
#define E_TEXT_START(i) {"content_block_start", "{'type':'content_block_start','index':" #i ",'content_block':" \
                                                "{'type':'text','text':''}}"}
#define E_THINK_START(i) {"content_block_start", "{'type':'content_block_start','index':" #i ",'content_block':" \
                                                 "{'type':'thinking','thinking':'','signature':''}}"}
#define E_TOOL_START(i, id, name) {"content_block_start", "{'type':'content_block_start','index':" #i             \
                                   ",'content_block':{'type':'tool_use','id':'" id "','name':'" name "','input':{}}}"}
#define E_TEXT(i, t) {"content_block_delta", "{'type':'content_block_delta','index':" #i ",'delta':"       \
                                             "{'type':'text_delta','text':'" t "'}}"}
#define E_THINK(i, t) {"content_block_delta", "{'type':'content_block_delta','index':" #i ",'delta':"       \
                                              "{'type':'thinking_delta','thinking':'" t "'}}"}
#define E_JSON(i, p) {"content_block_delta", "{'type':'content_block_delta','index':" #i ",'delta':"        \
                                             "{'type':'input_json_delta','partial_json':'" p "'}}"}
#define E_STOP(i) {"content_block_stop", "{'type':'content_block_stop','index':" #i "}"}
#define E_DELTA(reason, seq, in, out, cached) {"message_delta", "{'type':'message_delta','delta':{'stop_reason':'" \
                                               reason "','stop_sequence':" seq "},'usage':{'input_tokens':" #in    \
                                               ",'output_tokens':" #out ",'cache_creation_input_tokens':0,"        \
                                               "'cache_read_input_tokens':" #cached "}}"}
#define E_MSTOP {"message_stop", "{'type':'message_stop'}"}
#define E_ERROR(type, msg) {"error", AERR(type, msg)}

static const struct stream_case {
    const char *name;
    const char *in[MAX_IN];     /* upstream data, q-notation */
    struct ev out[MAX_OUT];
    int64_t prompt, completion, cached;
    int found, failed, done;
} stream_cases[] = {
    {"text",
     {ROLE, CONTENT("Hello"), CONTENT(" world"), FIN("stop"), USAGE(32, 15, 0), "[DONE]"},
     {E_START, E_TEXT_START(0), E_PING, E_TEXT(0, "Hello"), E_TEXT(0, " world"), E_STOP(0),
      E_DELTA("end_turn", "null", 32, 15, 0), E_MSTOP},
     32, 15, 0, 1, 0, 1},
    {"thinking then text, cached tokens",
     {ROLE, REASON("Let me"), CHK("{'reasoning_content':' think.','content':null}", "null"), CONTENT("42"),
      FIN("stop"), USAGE(100, 9, 64), "[DONE]"},
     {E_START, E_THINK_START(0), E_PING, E_THINK(0, "Let me"), E_THINK(0, " think."), E_STOP(0), E_TEXT_START(1),
      E_TEXT(1, "42"), E_STOP(1), E_DELTA("end_turn", "null", 36, 9, 64), E_MSTOP},
     100, 9, 64, 1, 0, 1},
    {"reasoning (newer name) and text in one delta",
     {CHK("{'role':'assistant','reasoning':'hm','content':'ok'}", "null"), FIN("stop"), "[DONE]"},
     {E_START, E_THINK_START(0), E_PING, E_THINK(0, "hm"), E_STOP(0), E_TEXT_START(1), E_TEXT(1, "ok"), E_STOP(1),
      E_DELTA("end_turn", "null", 0, 0, 0), E_MSTOP},
     0, 0, 0, 0, 0, 1},
    {"text then two tool calls",
     {ROLE, CONTENT("Checking."), TOOL(0, "call_1", "get_weather", ""), ARGS(0, "{\\'city\\':"),
      ARGS(0, " \\'Paris\\'}"), TOOL(1, "call_2", "get_time", "{}"), FIN("tool_calls"), USAGE(40, 60, 0), "[DONE]"},
     {E_START, E_TEXT_START(0), E_PING, E_TEXT(0, "Checking."), E_STOP(0), E_TOOL_START(1, "call_1", "get_weather"),
      E_JSON(1, "{\\'city\\':"), E_JSON(1, " \\'Paris\\'}"), E_STOP(1), E_TOOL_START(2, "call_2", "get_time"),
      E_JSON(2, "{}"), E_STOP(2), E_DELTA("tool_use", "null", 40, 60, 0), E_MSTOP},
     40, 60, 0, 1, 0, 1},
    {"tool call first: ping after it, no id -> call_<index>",
     {CHK("{'role':'assistant','content':null,'tool_calls':[{'index':0,'type':'function','function':{'name':'f',"
          "'arguments':''}}]}", "null"),
      ARGS(0, "{}"), FIN("tool_calls"), "[DONE]"},
     {E_START, E_TOOL_START(0, "call_0", "f"), E_PING, E_JSON(0, "{}"), E_STOP(0),
      E_DELTA("tool_use", "null", 0, 0, 0), E_MSTOP},
     0, 0, 0, 0, 0, 1},
    {"parallel calls in one delta",
     {CHK("{'tool_calls':[{'index':0,'id':'a','function':{'name':'f','arguments':'{}'}},{'index':1,'id':'b',"
          "'function':{'name':'g','arguments':'{}'}}]}", "'tool_calls'"), "[DONE]"},
     {E_START, E_TOOL_START(0, "a", "f"), E_PING, E_JSON(0, "{}"), E_STOP(0), E_TOOL_START(1, "b", "g"),
      E_JSON(1, "{}"), E_STOP(1), E_DELTA("tool_use", "null", 0, 0, 0), E_MSTOP},
     0, 0, 0, 0, 0, 1},
    {"interleaved pieces go to their call's block",
     {TOOL(0, "a", "f", ""), TOOL(1, "b", "g", ""), ARGS(0, "{}"), ARGS(1, "{}"), FIN("tool_calls"), "[DONE]"},
     {E_START, E_TOOL_START(0, "a", "f"), E_PING, E_STOP(0), E_TOOL_START(1, "b", "g"), E_JSON(0, "{}"),
      E_JSON(1, "{}"), E_STOP(1), E_DELTA("tool_use", "null", 0, 0, 0), E_MSTOP},
     0, 0, 0, 0, 0, 1},
    {"back and forth: each switch closes the open block",
     {CONTENT("a"), REASON("r"), CONTENT("b"), "[DONE]"},
     {E_START, E_TEXT_START(0), E_PING, E_TEXT(0, "a"), E_STOP(0), E_THINK_START(1), E_THINK(1, "r"), E_STOP(1),
      E_TEXT_START(2), E_TEXT(2, "b"), E_STOP(2), E_DELTA("end_turn", "null", 0, 0, 0), E_MSTOP},
     0, 0, 0, 0, 0, 1},
    {"length, content in the finish chunk",
     {ROLE, CHK("{'content':'cut'}", "'length'"), USAGE(5, 16, 0), "[DONE]"},
     {E_START, E_TEXT_START(0), E_PING, E_TEXT(0, "cut"), E_STOP(0), E_DELTA("max_tokens", "null", 5, 16, 0),
      E_MSTOP},
     5, 16, 0, 1, 0, 1},
    {"vLLM stop string -> stop_sequence",
     {CONTENT("a"), "{'id':'chatcmpl-abc','choices':[{'index':0,'delta':{},'finish_reason':'stop','stop_reason':"
                    "'END'}]}", "[DONE]"},
     {E_START, E_TEXT_START(0), E_PING, E_TEXT(0, "a"), E_STOP(0), E_DELTA("stop_sequence", "'END'", 0, 0, 0),
      E_MSTOP},
     0, 0, 0, 0, 0, 1},
    {"content_filter -> refusal; OpenAI refusal delta",
     {CHK("{'refusal':'No.'}", "null"), FIN("stop"), "[DONE]"},
     {E_START, E_TEXT_START(0), E_PING, E_TEXT(0, "No."), E_STOP(0), E_DELTA("refusal", "null", 0, 0, 0), E_MSTOP},
     0, 0, 0, 0, 0, 1},
    {"empty and role-only deltas, non-JSON and other choices: message_start only",
     {"not json", ROLE, CONTENT(""), CHK("{'content':null}", "null"), ": keepalive",
      "{'id':'chatcmpl-abc','choices':[{'index':1,'delta':{'content':'other choice'}}]}", "[DONE]"},
     {E_START, E_DELTA("end_turn", "null", 0, 0, 0), E_MSTOP},
     0, 0, 0, 0, 0, 1},
    {"[DONE] alone", {"[DONE]"},
     {{"message_start", "{'type':'message_start','message':{'id':'msg_','type':'message','role':'assistant',"
                        "'model':'claude-x','content':[],'stop_reason':null,'stop_sequence':null,'usage':"
                        "{'input_tokens':0,'output_tokens':0}}}"},
      E_DELTA("end_turn", "null", 0, 0, 0), E_MSTOP},
     0, 0, 0, 0, 0, 1},
    {"nothing after [DONE]",
     {CONTENT("a"), "[DONE]", CONTENT("late"), "[DONE]", "{'error':{'message':'x'}}"},
     {E_START, E_TEXT_START(0), E_PING, E_TEXT(0, "a"), E_STOP(0), E_DELTA("end_turn", "null", 0, 0, 0), E_MSTOP},
     0, 0, 0, 0, 0, 1},
    {"continuous usage: the latest counts win",
     {"{'id':'chatcmpl-abc','choices':[{'index':0,'delta':{'content':'a'}}],'usage':{'prompt_tokens':7,"
      "'completion_tokens':1}}",
      "{'id':'chatcmpl-abc','choices':[{'index':0,'delta':{'content':'b'},'finish_reason':'stop'}],'usage':"
      "{'prompt_tokens':7,'completion_tokens':2}}", "{'id':'chatcmpl-abc','choices':[],'usage':null}", "[DONE]"},
     {E_START, E_TEXT_START(0), E_PING, E_TEXT(0, "a"), E_TEXT(0, "b"), E_STOP(0),
      E_DELTA("end_turn", "null", 7, 2, 0), E_MSTOP},
     7, 2, 0, 1, 0, 1},
    {"error mid-stream: nothing after",
     {ROLE, CONTENT("Hi"), "{'error':{'message':'Engine died','type':'server_error','code':null}}", CONTENT("x"),
      "[DONE]"},
     {E_START, E_TEXT_START(0), E_PING, E_TEXT(0, "Hi"), E_ERROR("api_error", "Engine died")},
     0, 0, 0, 0, 1, 0},
    {"error first: no message_start, numeric code",
     {"{'error':{'message':'slow down','type':'requests','code':429}}"},
     {E_ERROR("rate_limit_error", "slow down")},
     0, 0, 0, 0, 1, 0},
    {"error overloaded", {"{'error':{'message':'busy','type':'overloaded'}}"},
     {E_ERROR("overloaded_error", "busy")}, 0, 0, 0, 0, 1, 0},
    {"error invalid_request_error stays", {ROLE, "{'error':{'message':'bad','type':'invalid_request_error'}}"},
     {E_START, E_ERROR("invalid_request_error", "bad")}, 0, 0, 0, 0, 1, 0},
    {"error rate limit code string", {"{'error':{'message':'x','code':'rate_limit_exceeded'}}"},
     {E_ERROR("rate_limit_error", "x")}, 0, 0, 0, 0, 1, 0},
    {"error a string, sluice's own code", {"{'error':'gone'}", "{'error':{'message':'idle','type':'server_error',"
                                                              "'code':'upstream_idle_timeout'}}"},
     {E_ERROR("api_error", "gone")}, 0, 0, 0, 0, 1, 0},
    {"text escaping",
     {CONTENT("say \\'hi\\'\\n\\\\ \xe2\x82\xac </b>"), FIN("stop"), "[DONE]"},
     {E_START, E_TEXT_START(0), E_PING, E_TEXT(0, "say \\'hi\\'\\n\\\\ \xe2\x82\xac </b>"), E_STOP(0),
      E_DELTA("end_turn", "null", 0, 0, 0), E_MSTOP},
     0, 0, 0, 0, 0, 1},
};

struct collected {
    char *event[MAX_OUT * 2];
    char *data[MAX_OUT * 2];
    size_t len[MAX_OUT * 2];
    int n;
    int stop_after;             /* emit returns -1 at this event (1-based), 0 = never */
};

static int collect(void *ctx, const char *event, const char *data, size_t len)
{
    struct collected *c = ctx;
    CHECK(data && data[len] == '\0', "event %d is not NUL-terminated", c->n);
    if (c->n < MAX_OUT * 2) {
        c->event[c->n] = strdup(event);
        c->data[c->n] = malloc(len + 1);
        memcpy(c->data[c->n], data, len + 1);
        c->len[c->n] = len;
    }
    c->n++;
    return c->stop_after && c->n >= c->stop_after ? -1 : 0;
}

static void collected_free(struct collected *c)
{
    for (int i = 0; i < c->n && i < MAX_OUT * 2; i++) {
        free(c->event[i]);
        free(c->data[i]);
    }
}

static void test_streams(void)
{
    for (size_t i = 0; i < sizeof stream_cases / sizeof stream_cases[0]; i++) {
        const struct stream_case *sc = &stream_cases[i];
        struct messages_stream s;
        messages_stream_init(&s, "claude-x");
        struct usage u = {0};
        struct collected got = {.n = 0};
        for (int e = 0; e < MAX_IN && sc->in[e]; e++) {
            char *data = q(sc->in[e]);
            int rc = messages_stream_chunk(&s, data, strlen(data), &u, collect, &got);
            CHECK(rc == 0, "%s: chunk %d returned %d", sc->name, e, rc);
            free(data);
        }
        int want_n = 0;
        while (want_n < MAX_OUT && sc->out[want_n].event)
            want_n++;
        CHECK(got.n == want_n, "%s: %d events, want %d", sc->name, got.n, want_n);
        for (int k = 0; k < got.n && k < want_n; k++) {
            char what[160];
            snprintf(what, sizeof what, "%s: event %d", sc->name, k);
            CHECK_STR(got.event[k], sc->out[k].event, what);
            check_json(what, got.data[k], got.len[k], sc->out[k].data);
        }
        for (int k = want_n; k < got.n && k < MAX_OUT * 2; k++)
            fprintf(stderr, "  %s: extra event %s %s\n", sc->name, got.event[k], got.data[k]);
        CHECK_INT(u.found, sc->found, sc->name);
        CHECK_INT(u.prompt_tokens, sc->prompt, sc->name);
        CHECK_INT(u.completion_tokens, sc->completion, sc->name);
        CHECK_INT(u.cache_read_tokens, sc->cached, sc->name);
        CHECK_INT(messages_stream_failed(&s), sc->failed, sc->name);
        CHECK_INT(messages_stream_done(&s), sc->done, sc->name);
        collected_free(&got);
    }
}

/* emit asking to stop (client gone) ends the translation with -1; the model
 * comes from the first chunk when init had none; u may be NULL; reasoning counts */
static void test_stream_stop(void)
{
    struct messages_stream s;
    struct collected got = {.n = 0, .stop_after = 1};
    char *role = q(ROLE), *text = q(CONTENT("x")), *done = q("[DONE]");
    messages_stream_init(&s, "m");
    CHECK_INT(messages_stream_chunk(&s, role, strlen(role), NULL, collect, &got), -1, "stop at message_start");
    collected_free(&got);

    struct collected got2 = {.n = 0, .stop_after = 3};   /* start, block start, ping */
    messages_stream_init(&s, "m");
    CHECK_INT(messages_stream_chunk(&s, text, strlen(text), NULL, collect, &got2), -1, "stop at ping");
    CHECK_INT(got2.n, 3, "nothing after the stop");
    collected_free(&got2);

    struct collected got3 = {.n = 0, .stop_after = 2};   /* block stop, message_delta */
    messages_stream_init(&s, "m");
    struct collected sink = {.n = 0};
    messages_stream_chunk(&s, text, strlen(text), NULL, collect, &sink);
    CHECK_INT(messages_stream_chunk(&s, done, strlen(done), NULL, collect, &got3), -1, "stop at message_delta");
    CHECK_INT(got3.n, 2, "no message_stop after the stop");
    CHECK_INT(messages_stream_done(&s), 1, "done even when stopped");
    CHECK_INT(messages_stream_chunk(&s, done, strlen(done), NULL, collect, &got3), 0, "[DONE] again");
    CHECK_INT(got3.n, 2, "[DONE] again sends nothing");
    collected_free(&got3);
    collected_free(&sink);

    struct collected got4 = {.n = 0};
    messages_stream_init(&s, NULL);
    CHECK_INT(messages_stream_chunk(&s, role, strlen(role), NULL, collect, &got4), 0, "model NULL");
    if (got4.n == 1)
        check_json("model from the chunk", got4.data[0], got4.len[0],
                   "{'type':'message_start','message':{'id':'msg_abc','type':'message','role':'assistant','model':"
                   "'qwen','content':[],'stop_reason':null,'stop_sequence':null,'usage':{'input_tokens':0,"
                   "'output_tokens':0}}}");
    collected_free(&got4);

    struct collected got5 = {.n = 0};
    struct usage u = {0};
    char *usage = q("{'id':'c','choices':[],'usage':{'prompt_tokens':10,'completion_tokens':8,"
                    "'completion_tokens_details':{'reasoning_tokens':6},'prompt_tokens_details':{'cached_tokens':4}}}");
    messages_stream_init(&s, "m");
    messages_stream_chunk(&s, usage, strlen(usage), &u, collect, &got5);
    CHECK(u.found && u.prompt_tokens == 10 && u.completion_tokens == 8 && u.reasoning_tokens == 6 &&
              u.cache_read_tokens == 4 && u.cache_creation_tokens == 0,
          "stream usage %lld/%lld/%lld/%lld", (long long)u.prompt_tokens, (long long)u.completion_tokens,
          (long long)u.reasoning_tokens, (long long)u.cache_read_tokens);
    collected_free(&got5);
    free(usage);
    free(role);
    free(text);
    free(done);
}

/* Counts near INT64_MAX from an upstream are clamped, never turned negative. */
static void test_huge_counts(void)
{
    static const char body[] = "{\"id\":\"c\",\"choices\":[{\"message\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}],"
                               "\"usage\":{\"prompt_tokens\":9223372036854775807,\"completion_tokens\":-5,"
                               "\"prompt_tokens_details\":{\"cached_tokens\":9223372036854775807}}}";
    struct buf out;
    struct usage u;
    buf_init(&out, 0);
    CHECK_INT(messages_response(body, sizeof body - 1, "m", &out, &u, NULL, 0), 0, "huge counts");
    CHECK(u.prompt_tokens == USAGE_COUNT_MAX && u.completion_tokens == 0 && u.cache_read_tokens == USAGE_COUNT_MAX,
          "clamped %lld/%lld", (long long)u.prompt_tokens, (long long)u.completion_tokens);
    CHECK(out.data && !strstr(out.data, "-"), "no negative count: %s", out.data ? out.data : "");
    buf_free(&out);
}

int main(void)
{
    test_requests();
    test_request_arguments();
    test_request_capped();
    test_stop_reasons();
    test_responses();
    test_response_capped();
    test_errors();
    test_streams();
    test_stream_stop();
    test_huge_counts();
    printf("%zu request, %zu stop reason, %zu response, %zu error, %zu stream cases\n",
           sizeof req_cases / sizeof req_cases[0], sizeof stop_cases / sizeof stop_cases[0],
           sizeof resp_cases / sizeof resp_cases[0], sizeof error_cases / sizeof error_cases[0],
           sizeof stream_cases / sizeof stream_cases[0]);
    return check_done();
}
